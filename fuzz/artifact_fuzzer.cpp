// The artifact reader and the heap analysis on arbitrary files: what
// `memtrack info`, `dump` and `report` do with a damaged or hostile artifact.
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "analyze/heap_replay.h"
#include "format/artifact.h"
#include "memory_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static memtrack::fuzz::MemoryFile file;
  const std::string& path = file.hold(data, size);
  memtrack::HeapReplay analyzer;
  uint64_t modules = 0;
  try {
    memtrack::ReadResult read = memtrack::read_artifact(
        path, [&](const memtrack::Event& event) { analyzer.on_event(event); },
        [&](const memtrack::ModuleInfo&) { ++modules; });
    if (read.error) read.warnings.push_back(*read.error);
    analyzer.finish();
    memtrack::Report report = analyzer.build_report(read.header, read.trailer, read.warnings);
    (void)report;
  } catch (const std::runtime_error&) {
    // No valid header: refused with a message, as the reader documents.
  }
  return 0;
}
