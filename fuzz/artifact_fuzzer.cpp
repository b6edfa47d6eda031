// The artifact reader and the heap analysis on arbitrary files: what
// `memtrack info`, `dump` and `report` do with a damaged or hostile artifact,
// an aggregated one's state (record --aggregate) included.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "analyze/heap_aggregate.h"
#include "analyze/heap_replay.h"
#include "format/artifact.h"
#include "memory_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static memtrack::fuzz::MemoryFile file;
  const std::string& path = file.hold(data, size);
  memtrack::HeapReplay analyzer;
  uint64_t modules = 0;
  std::vector<uint8_t> state;
  try {
    memtrack::ReadResult read = memtrack::read_artifact(
        path, [&](const memtrack::Event& event) { analyzer.on_event(event); },
        [&](const memtrack::ModuleInfo&) { ++modules; },
        [&](const memtrack::AggregatePart& part) { state.insert(state.end(), part.state.begin(), part.state.end()); });
    if (read.error) read.warnings.push_back(*read.error);
    analyzer.finish();
    memtrack::Report report = analyzer.build_report(read.header, read.trailer, read.warnings);
    (void)report;
    if (!state.empty()) {
      memtrack::SiteId next = 0;
      try {
        memtrack::AggregatedFigures figures = memtrack::restore_aggregate(
            state, [&](uint64_t, int32_t, int32_t) { return ++next; }, read.header.start_monotonic_ns, false);
        memtrack::Report restored = figures.replay.build_report(read.header, read.trailer, read.warnings);
        (void)restored;
      } catch (const std::runtime_error&) {
        // A malformed state: refused by name (recording_analysis warns with it).
      }
    }
  } catch (const std::runtime_error&) {
    // No valid header: refused with a message, as the reader documents.
  }
  return 0;
}
