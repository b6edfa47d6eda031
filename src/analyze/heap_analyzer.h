// Streaming heap analysis of an artifact's events. Feed every event in file
// (time) order to on_event(), then build_report() with the header and
// trailer the reader returned. Memory is proportional to the live blocks,
// processes and threads, never to the number of events.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyze/process_heap.h"
#include "analyze/report.h"
#include "format/artifact.h"
#include "format/event.h"

namespace memtrack {

class HeapAnalyzer {
 public:
  void on_event(const Event& event);

  // Processes still running count their live blocks as leaked at the end of
  // the trace. reader_warnings are carried into the report; a missing
  // trailer adds one. Does not change the analyzer.
  Report build_report(const ArtifactHeader& header, const std::optional<ArtifactTrailer>& trailer,
                      std::vector<std::string> reader_warnings) const;

  // Blocks currently live in all running processes.
  size_t live_blocks() const;
  // Live bytes of the running process `pid` (0 when none runs): the
  // timeline's heap series (analyze/timeline.h).
  uint64_t live_bytes_of(int32_t pid) const;

 private:
  ProcessHeap* find_running(int32_t pid);
  // A new incarnation of pid; a running one is closed first (pid reuse
  // whose Exit record is missing).
  ProcessHeap& start_process(int32_t pid, uint64_t birth_ns);

  std::deque<ProcessHeap> processes_;  // every incarnation, in order of birth; stable addresses
  std::unordered_map<int32_t, ProcessHeap*> running_;
  uint64_t total_live_bytes_ = 0;
  uint64_t total_peak_bytes_ = 0;
  uint64_t total_peak_ns_ = 0;
  uint64_t events_ = 0;
  uint64_t last_event_ns_ = 0;
};

}  // namespace memtrack
