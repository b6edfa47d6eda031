// Writes the artifact the browser test brushes (tests/browser/html_report_test.py):
//   html_window_trace FILE
// Two processes over 2 s, four call paths allocating in phases that overlap
// (so each window of time has its own ranking), frees, leaks, RSS and a
// mapping of the program's own: `memtrack report --format html` of it gets
// a timeline and the per-slice counts of every call path.
#include <algorithm>
#include <iostream>
#include <memory>
#include <vector>

#include "format/artifact.h"

namespace {

using namespace memtrack;

constexpr uint64_t kStart = 1'000'000'000;
constexpr uint64_t kMs = 1'000'000;

Event event(EventType type, int32_t pid, uint64_t ms, uint64_t extra_ns = 0) {
  Event e;
  e.type = type;
  e.pid = e.tid = pid;
  e.timestamp = kStart + ms * kMs + extra_ns;
  return e;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: html_window_trace FILE\n";
    return 2;
  }
  std::vector<Event> events;
  auto image = std::make_shared<ProcessImage>();
  image->path = "/usr/bin/phases";
  image->comm = "phases";
  image->argv = {"phases", "--window"};
  events.push_back(event(EventType::Exec, 100, 0));
  events.back().image = image;
  // Call paths 1-4: [0x401N00, 0x402000, 0x403000], innermost first.
  for (uint64_t path = 1; path <= 4; ++path) {
    auto stack = std::make_shared<StackDefinition>();
    stack->hash = path;
    stack->chain = {0x401000 + 0x100 * path, 0x402000, 0x403000};
    events.push_back(event(EventType::Stack, 100, 0, path));
    events.back().stack = stack;
  }
  events.push_back(event(EventType::Fork, 101, 100));
  events.back().parent_pid = 100;
  uint64_t next_addr = 0x10000;
  // path, pid, first ms, last ms, every ms, size, freed after ms (0: leaked)
  struct Phase {
    uint64_t path;
    int32_t pid;
    uint64_t first, last, every, size, lifetime;
  };
  for (const Phase& phase : {Phase{1, 100, 0, 800, 10, 1000, 5}, Phase{2, 100, 500, 1500, 20, 3000, 50},
                             Phase{3, 100, 1200, 1990, 25, 7000, 0}, Phase{4, 101, 110, 1900, 30, 500, 30}}) {
    for (uint64_t ms = phase.first, i = 0; ms <= phase.last; ms += phase.every, ++i) {
      Event alloc = event(EventType::Malloc, phase.pid, ms, 1000 + phase.path);
      alloc.addr = next_addr;
      next_addr += 0x10000;
      alloc.size = phase.size + i;  // distinct sizes: no two windows tie by chance
      alloc.stack_hash = phase.path;
      events.push_back(alloc);
      if (phase.lifetime && i % 10 != 9) {  // every tenth block leaks
        Event free = event(EventType::Free, phase.pid, ms + phase.lifetime, 2000 + phase.path);
        free.addr = alloc.addr;
        events.push_back(free);
      }
    }
  }
  for (uint64_t ms = 0; ms <= 1990; ms += 50) {
    Event rss = event(EventType::Rss, 100, ms, 3000);
    rss.member = static_cast<int32_t>(RssMember::Anon);
    rss.size = (4 + (ms % 700) / 50) * 1024 * 1024;
    events.push_back(rss);
  }
  Event mmap = event(EventType::Mmap, 100, 1000, 4000);
  mmap.addr = 0x7f0000000000;
  mmap.size = 8 << 20;
  events.push_back(mmap);
  events.push_back(event(EventType::Exit, 101, 1950));
  events.push_back(event(EventType::Exit, 100, 2000));
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.timestamp < b.timestamp; });

  ArtifactHeader header;
  header.command = {"phases", "--window"};
  header.start_monotonic_ns = kStart;
  header.page_size = 4096;
  ArtifactWriter writer(argv[1], header);
  writer.append(events);
  ArtifactTrailer trailer;
  trailer.end_monotonic_ns = kStart + 2000 * kMs;
  trailer.counters = {{"events_lost", 0}};
  writer.finish(trailer);
  return 0;
}
