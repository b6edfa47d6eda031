// One artifact analysed in one streamed pass: the reader decodes events on
// the calling thread while a consumer thread, fed batches through a bounded
// queue, replays the heap (per process and per call site), names each
// allocation's call site and follows memory over time. What `report`, `diff`
// and `check` run, and what any other front end calls.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "analyze/profile.h"
#include "analyze/report.h"
#include "analyze/timeline.h"
#include "symbolize/symbolizer.h"

namespace memtrack {

// What a front end is told while the analysis runs (the calls come from the
// calling thread); an empty function: not told.
struct AnalysisProgress {
  std::function<void(uint64_t events)> events_read;  // every 2^20 events read
  std::function<void()> reading_done;  // unwinding and symbolizing follow
};

struct AnalysisOptions {
  std::string file;  // the artifact
  // Which allocations the call sites and the timeline count (none: all):
  // these processes, these threads, made in [from_s, to_s] seconds into the
  // recording, with a frame whose function name contains `function`.
  std::vector<int32_t> pids, tids;
  std::optional<double> from_s, to_s;
  std::string function;
  // The sites by what they had live this many seconds into the recording,
  // instead of at the peak.
  std::optional<double> at_s;
  std::string suppressions_file;    // LeakSanitizer-style leak:PATTERN lines
  bool show_runtime_leaks = false;  // count the C/C++ runtime's blocks as leaks
  SymbolizerOptions symbols;
  std::string modules_dir;  // export-modules output for files missing here
  bool call_paths = true;   // false: heap figures only, no unwinding or symbolizing
  // One site per call path, process and thread (ProfileOptions::split_by_thread).
  bool sites_by_thread = false;
  // Each call path's allocations over time (Timeline::sites).
  bool site_timelines = false;
  AnalysisProgress progress;
};

// One artifact analysed: per-process heap figures, the profile of
// allocation sites, memory over time, and what the reader found wrong.
struct AnalyzedRecording {
  Report report;
  Profile profile;
  std::vector<std::string> read_warnings;
  std::optional<std::string> read_error;
  Timeline timeline;  // memory over time, in the from/to window
  bool damaged() const { return read_error || !read_warnings.empty(); }
};

// Throws std::runtime_error for unreadable inputs (the artifact, the modules
// directory, the suppressions file) and for times that are no seconds >= 0;
// a damaged or incomplete artifact is analysed as far as it can be read.
AnalyzedRecording analyze_recording(const AnalysisOptions& options);

}  // namespace memtrack
