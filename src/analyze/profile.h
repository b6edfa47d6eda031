// Where memory went: allocation sites (distinct call paths) with their costs,
// resolved to modules and symbolized. Built by ProfileBuilder from an
// artifact's events; rendered as text, JSON, folded stacks and pprof
// (src/report). Figures are defined in docs/REPORT.md.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "symbolize/source_frame.h"

namespace memtrack {

// A mapped file, as the recording identified it.
struct ProfileModule {
  std::string path;
  std::string build_id;  // lowercase hex; empty when the file had none
  // One placement (pprof needs a range): the first placement seen.
  uint64_t start = 0;
  uint64_t limit = 0;
  uint64_t file_offset = 0;
  bool symbolized = false;  // a file or embedded module was found for it
};

// One code address of a call path, shared by every site through it.
struct ProfileLocation {
  uint64_t address = 0;     // in the process that defined the stack (first seen)
  int32_t module = -1;      // index in Profile::modules; -1 when no mapping covers it
  uint64_t file_offset = 0; // of the address in the module's file
  // Innermost first; empty when nothing is known (rendered by address).
  std::vector<SourceFrame> frames;
  // An instruction's own address (a signal trampoline, an interrupted pc);
  // otherwise a return address, whose call is the instruction before it.
  bool exact = false;
  // A Python frame: `address` is its code object's id, `file_offset` the
  // instruction (code unit) it executes; `frames` its function, file and line.
  bool python = false;
};

// Why the call path of a site ends where it does.
enum class StackOutcome : uint8_t {
  Complete,        // reached the process or thread entry
  TruncatedCopy,   // the copied stack bytes ended first
  NoCfi,           // an address without unwind info (the frame-pointer chain was tried after it)
  BadCfa,          // the unwind produced an impossible frame (outside the copy, not increasing)
  NoModule,        // an address outside every recorded mapping
  FrameLimit,      // longer than the frame limit of every walk and unwind (256): the innermost frames kept
  MissingModule,   // the module's file (and CFI) was not available offline
  NoStack,         // the allocation was recorded without a stack
  Undefined,       // its Stack record is missing from the artifact (lost or cut off)
};
inline constexpr int kStackOutcomeCount = 9;
// "complete", "truncated-copy", "no-cfi", "bad-cfa", "no-module", "frame-limit",
// "missing-module", "no-stack", "undefined".
const char* stack_outcome_name(StackOutcome outcome);

// Costs of the allocations of one site (or of everything), over the
// allocations the filters selected.
struct SiteCosts {
  uint64_t allocations = 0;      // allocation records
  uint64_t allocated_bytes = 0;  // their sizes summed
  uint64_t peak_bytes = 0;       // live at the moment of the heap's peak
  uint64_t peak_allocations = 0;
  uint64_t leaked_bytes = 0;     // live at exit or exec
  uint64_t leaked_allocations = 0;
  uint64_t live_at_end_bytes = 0;  // live at the end of the recording, the process still running
  uint64_t live_at_end_allocations = 0;
  uint64_t temporary_allocations = 0;  // freed by their thread before it allocated again
  uint64_t temporary_bytes = 0;
  void add(const SiteCosts& other);
  bool operator==(const SiteCosts&) const = default;
};

// One distinct call path (after unwinding and merging definitions that
// resolve to the same locations).
struct ProfileSite {
  std::vector<uint32_t> locations;  // indexes in Profile::locations, innermost (the allocator's caller) first
  StackOutcome outcome = StackOutcome::NoStack;
  bool frame_pointer_fallback = false;  // part of the path came from the frame-pointer chain
  SiteCosts costs;
  // The allocating process and thread, with ProfileOptions::split_by_thread
  // (0 otherwise: the site sums every thread).
  int32_t pid = 0;
  int32_t tid = 0;
  // The HeapReplay SiteIds merged into this site (their figures over time
  // are in Timeline::sites).
  std::vector<uint32_t> replay_sites;
};

struct Profile {
  std::vector<ProfileModule> modules;
  std::vector<ProfileLocation> locations;
  std::vector<ProfileSite> sites;
  SiteCosts totals;
  uint64_t peak_time_ns = 0;  // since the recording start; 0 when nothing was live
  // `report --at`: the moment the peak costs describe instead of the peak
  // (peak_time_ns is then that moment).
  std::optional<uint64_t> live_at_ns;
  // The recording: when it started (ns since the epoch; 0 unknown), how long
  // it lasted, and its command line (for pprof's time and comment fields).
  uint64_t start_realtime_ns = 0;
  uint64_t duration_ns = 0;
  std::string command;
  bool attached = false;  // record --pid: `command` is "--pid N" (recording_attached)
  // Stack definitions, and allocations, by how their call path ended.
  std::array<uint64_t, kStackOutcomeCount> definitions_by_outcome{};
  std::array<uint64_t, kStackOutcomeCount> allocations_by_outcome{};
  // Leaks of sites matched by a suppression (leak:pattern): taken out of the
  // sites' and the totals' leaked figures, counted here.
  uint64_t suppressed_leaked_bytes = 0;
  uint64_t suppressed_leaked_allocations = 0;
  // Leaks of sites matched by the built-in list of allocations the C and C++
  // runtimes keep for the whole process (src/analyze/suppressions.h): taken
  // out like suppressed ones, unless ProfileOptions::show_runtime_leaks.
  uint64_t runtime_leaked_bytes = 0;
  uint64_t runtime_leaked_allocations = 0;
  // The replay's sites (HeapReplay SiteIds) of those two kinds, whose leaks
  // the report's figures leave out too (HeapReplay::exclude_leaks).
  std::vector<uint32_t> suppressed_replay_sites, runtime_replay_sites;
  std::vector<std::string> warnings;  // modules not found, unwinding problems (each once)
};

}  // namespace memtrack
