// The result of analysing one artifact: per-process and total heap figures.
// Produced by HeapReplay, rendered by src/report. Every figure is defined
// in docs/REPORT.md; keep that file in step with this one.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analyze/size_histogram.h"
#include "format/artifact.h"

namespace memtrack {

struct CallsByKind {
  uint64_t malloc = 0;
  uint64_t calloc = 0;
  uint64_t realloc = 0;
  uint64_t aligned_alloc = 0;

  uint64_t total() const { return malloc + calloc + realloc + aligned_alloc; }
  bool operator==(const CallsByKind&) const = default;
};

// Figures computed for each process and, summed or over the whole trace,
// for the totals. Times are ns since the header's start_monotonic_ns.
struct HeapFigures {
  CallsByKind calls;
  uint64_t free_calls = 0;
  // Free records (and reallocs of a non-NULL old block) whose block was not
  // live, in an address space the recording saw from its start.
  uint64_t unmatched_frees = 0;
  // The same in an address space that existed before a recording attached
  // to it: blocks allocated before the recording.
  uint64_t frees_of_earlier_blocks = 0;
  uint64_t total_allocated = 0;  // sum of the sizes of all allocation records
  uint64_t peak_memory = 0;      // maximum live bytes
  std::optional<uint64_t> peak_time_ns;  // when the peak was first reached; nullopt if it is 0
  // Own blocks still live at exit or at exec; with call paths, less those
  // the runtime keeps for the whole process and the suppressed ones
  // (HeapReplay::exclude_leaks), which are counted here:
  uint64_t leaked_bytes = 0;
  uint64_t leaked_count = 0;
  uint64_t runtime_held_bytes = 0;
  uint64_t runtime_held_count = 0;
  uint64_t suppressed_leaked_bytes = 0;
  uint64_t suppressed_leaked_count = 0;
  // Own blocks still live when the recording ended in a process still
  // running: not leaks, the process may free them later.
  uint64_t live_at_end_bytes = 0;
  uint64_t live_at_end_count = 0;
  // Blocks inherited at fork that the process never freed; they belong to the
  // parent's allocations, so they are not counted as this process's leaks.
  uint64_t inherited_unfreed_bytes = 0;
  uint64_t inherited_unfreed_count = 0;
  uint64_t temporary_allocations = 0;
  SizeHistogram histogram;  // allocation records by size
  uint64_t duration_ns = 0;
  uint64_t threads = 0;  // distinct tids seen
  // Highest RSS (Rss records, analyze/timeline.h); nullopt when not recorded.
  std::optional<uint64_t> peak_rss;

  uint64_t alloc_calls() const { return calls.total(); }
  double average_allocation_size() const;
  bool operator==(const HeapFigures&) const = default;
};

// Which way a process's allocator calls were recorded (docs/FORMAT.md §2.6):
// by uprobes, by the interposer (the fast path), or by each in different
// images (an exec between them). Only images that allocated or freed count,
// unless none did (then the last image's way).
enum class RecordedBy : uint8_t { Uprobes = 1, Interposer = 2, Both = 3 };
// "uprobes", "interposer", "both".
std::string_view recorded_by_name(RecordedBy way);

struct ProcessReport {
  int32_t pid = 0;
  std::optional<int32_t> parent_pid;  // known from a Fork record only
  std::string command;                // "" when unknown
  std::string exe;                    // "" when unknown
  uint64_t start_time_ns = 0;         // first record, ns since recording start
  std::optional<int32_t> exit_code;   // raw wait status; nullopt if no Exit record
  bool running_at_end = false;        // no Exit record: the recording ended first
  RecordedBy recorded_by = RecordedBy::Uprobes;
  HeapFigures figures;
  bool operator==(const ProcessReport&) const = default;
};

struct Report {
  ArtifactHeader header;
  std::vector<ProcessReport> processes;  // in order of first appearance
  HeapFigures totals;
  uint64_t events = 0;  // records analysed
  // From the trailer; all nullopt when the recording was not finalized.
  // exit_status of an attached recording: its first process's exit_code.
  std::optional<int32_t> exit_status;
  std::optional<std::map<std::string, uint64_t>> counters;
  std::optional<uint64_t> lost_events;  // sum of the loss counters
  std::vector<std::string> warnings;
  // The recording attached to running processes (recording_attached).
  bool attached = false;
  // Processes still running when the recording ended.
  size_t running_at_end() const;
};

// Whether the recording attached to running processes (`record --pid`):
// the header's "attached" feature, or, in artifacts older than it, its
// command "--pid N".
bool recording_attached(const ArtifactHeader& header);

// ns from origin to timestamp; 0 for a timestamp before the origin.
inline uint64_t ns_since(uint64_t timestamp, uint64_t origin) {
  return timestamp > origin ? timestamp - origin : 0;
}

// Trailer counters named *_lost or *_dropped count events missing from the artifact.
bool is_loss_counter(std::string_view name);
uint64_t sum_loss_counters(const std::map<std::string, uint64_t>& counters);

}  // namespace memtrack
