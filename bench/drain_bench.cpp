// The recorder's side of the interposer fast path, per event: draining the
// shared chunks (src/record/intake/shm_events.cpp), ordering the events by time and
// appending them to the artifact writer, as the ring poller does. The chunks
// are filled the way the interposer fills them (one thread, or several
// threads interleaved in time), outside the timed region. Figures and the
// command to rerun them: docs/BENCHMARKS.md, "The recorder's throughput".
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "format/artifact.h"
#include "realistic_trace.h"
#include "record/intake/event_order.h"
#include "record/intake/shm_events.h"
#include "wire/shared_memory.h"

namespace memtrack::bench {
namespace {

// One drain's worth per thread: what a chunk holds when it is drained half full.
constexpr uint32_t kEventsPerThread = MT_SHM_CHUNK_EVENTS / 2;

// The channel and its file mapped a second time, as an interposer maps it.
struct SharedChunks {
  SharedChunks() : channel("", static_cast<uid_t>(-1)) {
    std::string path;
    for (const std::string& entry : channel.environment_for_command({}))
      if (entry.starts_with(MT_SHM_ENV "=")) path = entry.substr(sizeof(MT_SHM_ENV));
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error("cannot open " + path);
    base = mmap(nullptr, mt_shm_size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) throw std::runtime_error("cannot map " + path);
  }
  ~SharedChunks() { munmap(base, mt_shm_size()); }

  // Publishes `count` events of `threads` threads, their timestamps
  // interleaved, each thread in its own chunk, as their interposers would.
  void fill(const std::vector<Event>& trace, uint32_t threads, uint32_t count, uint64_t* clock) {
    for (uint32_t t = 0; t < threads; ++t) {
      mt_shm_chunk* c = mt_shm_chunk_at(base, t);
      if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == MT_CHUNK_FREE) {
        c->pid = 1000;
        c->tid = 1000 + t;
        __atomic_store_n(&c->state, MT_CHUNK_OWNED, __ATOMIC_RELEASE);
        auto* header = static_cast<mt_shm_header*>(base);
        header->chunks_used = std::max(header->chunks_used, t + 1);
      }
    }
    for (uint32_t i = 0; i < count; ++i) {
      uint32_t t = i % threads;
      mt_shm_chunk* c = mt_shm_chunk_at(base, t);
      const Event& source = trace[(next++) % trace.size()];
      mt_alloc_event& e = c->events[c->head & (MT_SHM_CHUNK_EVENTS - 1)];
      e = {};
      e.timestamp = *clock += 40;
      e.pid = c->pid;
      e.tid = c->tid;
      e.addr = source.addr;
      e.size = source.size;
      e.old_addr = source.old_addr;
      e.kind = source.type == EventType::Free      ? MT_FREE
               : source.type == EventType::Calloc  ? MT_CALLOC
               : source.type == EventType::Realloc ? MT_REALLOC
                                                   : MT_MALLOC;
      __atomic_store_n(&c->head, c->head + 1, __ATOMIC_RELEASE);
    }
  }

  InterposerChannel channel;
  void* base = nullptr;
  size_t next = 0;
};

const std::vector<Event>& trace() {
  static const std::vector<Event> events = realistic_trace(1 << 16, 42);
  return events;
}

std::string scratch_file() {
  return (std::filesystem::temp_directory_path() / ("memtrack-drain-bench-" + std::to_string(getpid()))).string();
}

// Drain and order only: what the poller thread spends per event.
void drain_and_order(benchmark::State& state) {
  const auto threads = static_cast<uint32_t>(state.range(0));
  SharedChunks shm;
  EventOrder order;
  std::vector<Event> batch;
  uint64_t clock = 1'000'000'000, events = 0;
  for (auto _ : state) {
    state.PauseTiming();
    shm.fill(trace(), threads, kEventsPerThread * threads, &clock);
    state.ResumeTiming();
    shm.channel.drain(order);
    batch.clear();
    order.take(clock, false, batch);
    events += batch.size();
    benchmark::DoNotOptimize(batch.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(events));
}
BENCHMARK(drain_and_order)->Arg(1)->Arg(4)->Unit(benchmark::kMillisecond);

// Drain, order and append to the artifact writer (1 worker, the recorder's
// default on 2 cores), its compression included: the process's CPU time.
void drain_order_write(benchmark::State& state) {
  const auto threads = static_cast<uint32_t>(state.range(0));
  SharedChunks shm;
  EventOrder order;
  const std::string path = scratch_file();
  uint64_t clock = 1'000'000'000, events = 0;
  {
    WriterOptions options;
    options.workers = 1;
    ArtifactWriter writer(path, ArtifactHeader{}, options);
    for (auto _ : state) {
      state.PauseTiming();
      shm.fill(trace(), threads, kEventsPerThread * threads, &clock);
      state.ResumeTiming();
      shm.channel.drain(order);
      std::vector<Event> batch;
      order.take(clock, false, batch);
      events += batch.size();
      writer.append(batch);
    }
    writer.finish(ArtifactTrailer{});
  }
  std::filesystem::remove(path);
  state.SetItemsProcessed(static_cast<int64_t>(events));
}
BENCHMARK(drain_order_write)->Arg(1)->Arg(4)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();

}  // namespace
}  // namespace memtrack::bench
