// Artifact encoding and decoding throughput, size on disk and encoder memory.
// Figures and the command to rerun them: docs/BENCHMARKS.md, "Artifact
// size"; earlier runs: docs/benchmarks-history.md, "Artifact encoding".
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "format/artifact.h"
#include "realistic_trace.h"

namespace memtrack::bench {
namespace {

// 16 full frames: enough for every worker count measured to have work.
constexpr size_t kRealisticEvents = 16 * kFrameEvents;

// A directory under /tmp for the benchmark files, removed at exit.
class ScratchDir {
 public:
  ScratchDir() {
    char pattern[] = "/tmp/memtrack-format-bench-XXXXXX";
    if (!::mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

const ScratchDir& scratch() {
  static const ScratchDir dir;
  return dir;
}

const std::vector<Event>& realistic_events() {
  static const std::vector<Event> events = realistic_trace(kRealisticEvents, 42);
  return events;
}

// Uniformly random allocation records: a worst case for compression.
std::vector<Event> random_events(size_t count) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint64_t> size(8, 8191);
  std::vector<Event> events(count);
  uint64_t timestamp = 1'000'000'000;
  for (Event& event : events) {
    event.type = static_cast<EventType>(rng() % 5);  // Malloc, Calloc, Realloc, AlignedAlloc, Free
    event.pid = static_cast<int32_t>(rng() % 32768);
    event.tid = static_cast<int32_t>(rng() % 32768);
    event.timestamp = timestamp += rng() % 4096;
    event.addr = rng() & 0x7fff'ffff'fff0;
    if (event.type != EventType::Free) event.size = size(rng);
    if (event.type == EventType::Realloc) event.old_addr = rng() & 0x7fff'ffff'fff0;
  }
  return events;
}

// Writes `events` once; returns the writer's stats.
WriterStats write_once(const std::string& path, const std::vector<Event>& events,
                       WriterOptions options) {
  ArtifactWriter writer(path, ArtifactHeader{}, options);
  writer.append(events);
  writer.finish(ArtifactTrailer{});
  return writer.stats();
}

void report(benchmark::State& state, size_t events, const WriterStats& stats) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * events));
  state.counters["bytes_per_event"] =
      static_cast<double>(stats.bytes) / static_cast<double>(events);
  state.counters["peak_encoder_bytes"] = static_cast<double>(stats.buffer_bytes);
}

// Single-worker writer throughput on random records.
void write_events(benchmark::State& state) {
  const std::vector<Event> events = random_events(static_cast<size_t>(state.range(0)));
  const std::string path = scratch().file("write_events.memtrack");
  WriterStats stats;
  for (auto _ : state) stats = write_once(path, events, {.workers = 1});
  report(state, events.size(), stats);
}
BENCHMARK(write_events)
    ->Arg(10'000)
    ->Arg(100'000)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// The realistic mix at the default level, by worker count. The work happens
// on the worker threads, so rates use wall time and the CPU column is the
// whole process's CPU time: events / CPU time is the cost per core.
void encode_events_realistic(benchmark::State& state) {
  const std::vector<Event>& events = realistic_events();
  const std::string path = scratch().file("encode_events_realistic.memtrack");
  WriterOptions options{.workers = static_cast<unsigned>(state.range(0))};
  WriterStats stats;
  for (auto _ : state) stats = write_once(path, events, options);
  report(state, events.size(), stats);
}
BENCHMARK(encode_events_realistic)
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->Arg(16)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// The realistic mix by zstd level, one worker: how the default was chosen.
void encode_level_realistic(benchmark::State& state) {
  const std::vector<Event>& events = realistic_events();
  const std::string path = scratch().file("encode_level_realistic.memtrack");
  WriterOptions options{.workers = 1, .zstd_level = static_cast<int>(state.range(0))};
  WriterStats stats;
  for (auto _ : state) stats = write_once(path, events, options);
  report(state, events.size(), stats);
}
BENCHMARK(encode_level_realistic)
    ->DenseRange(-5, -1)
    ->DenseRange(1, 4)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// 16,384 raw Stack records (2 KiB of random stack bytes, 17 registers, a
// 16-frame chain), each followed by the Malloc that refers to it; one worker.
// Bytes/s counts the raw stack bytes; the 32,768 events fit in one frame.
void write_stack_events(benchmark::State& state) {
  static const std::vector<Event> events = stack_trace(16'384, 42);
  const std::string path = scratch().file("write_stack_events.memtrack");
  WriterStats stats;
  for (auto _ : state) stats = write_once(path, events, {.workers = 1});
  report(state, events.size(), stats);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * raw_stack_bytes(events)));
}
BENCHMARK(write_stack_events)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

void decode_events_realistic(benchmark::State& state) {
  const std::vector<Event>& events = realistic_events();
  const std::string path = scratch().file("decode_events_realistic.memtrack");
  write_once(path, events, {});
  uint64_t bytes_allocated = 0;
  for (auto _ : state) {
    ReadResult result =
        read_artifact(path, [&](const Event& event) { bytes_allocated += event.size; });
    if (result.error || result.stats.events != events.size()) {
      state.SkipWithError("the artifact did not read back whole");
      break;
    }
  }
  benchmark::DoNotOptimize(bytes_allocated);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * events.size()));
}
BENCHMARK(decode_events_realistic)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace memtrack::bench
