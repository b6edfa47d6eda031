// Two recordings compared (`memtrack diff BASE HEAD`): the heap figures of
// the totals and of each process, processes matched across the runs by their
// place in the process tree, and allocation sites matched by their
// symbolized frames. docs/REPORT.md ("memtrack diff") defines the matching
// rules; keep it in step with this file.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "analyze/cost_kind.h"
#include "analyze/profile.h"
#include "analyze/report.h"

namespace memtrack {

// The figures a diff shows and budgets test, of one process or the totals.
// Leaked: own blocks live when their address space ended (exit, exec);
// LiveAtEnd: when the recording ended first, the process still running.
enum class Figure {
  AllocCalls,
  FreeCalls,
  Allocated,
  Peak,
  PeakRss,
  Leaked,
  LeakedBlocks,
  LiveAtEnd,
  LiveAtEndBlocks,
  Temporary
};

struct FigureInfo {
  Figure figure;
  const char* name;   // in budget expressions and JSON: "alloc_calls", "peak", ...
  const char* title;  // in text and markdown: "allocation calls", ...
  bool bytes;         // a size (units KiB, MiB, ...), else a count
};
// Every figure, in the order outputs list them.
std::span<const FigureInfo> all_figures();
const FigureInfo& figure_info(Figure figure);

// The figure's value; nullopt when the recording does not have it.
std::optional<uint64_t> figure_value(const HeapFigures& figures, Figure figure);

// A figure in the base and the head run; nullopt on a side that lacks it
// (a process only in one run, a figure not recorded).
struct FigureChange {
  std::optional<uint64_t> base, head;
  // head - base, when both are known.
  std::optional<long double> change() const;
  // 100 * (head - base) / base; +inf when base is 0 and head is not, 0 when
  // both are 0; nullopt when one is unknown.
  std::optional<long double> relative_percent() const;
};

// One process of either run, or a matched pair, at its depth in the tree
// (0: started by no recorded process).
struct ProcessMatch {
  const ProcessReport* base = nullptr;
  const ProcessReport* head = nullptr;
  size_t depth = 0;
  enum class MatchedBy { Command, Executable, Unmatched } matched_by = MatchedBy::Unmatched;
  // The name budgets select it by: its executable's file name (argv[0]'s
  // without an exe).
  std::string name;
  FigureChange change(Figure figure) const;
};

// How a site is matched: per frame, innermost first (inline levels
// expanded), the function without offset, the source file's name and the
// module's file name — no address, line, directory or load bias.
struct SiteKeyFrame {
  std::string function;  // "" when no symbol covers the address
  std::string file;      // source file name without directories; "" without line information
  std::string module;    // mapped file name without directories; "" outside every mapping
  auto operator<=>(const SiteKeyFrame&) const = default;
};

// A frame as outputs show it (from one site of the group).
struct DiffFrame {
  std::string label;  // frame_label(CallSite)
  std::string file;
  uint32_t line = 0;
  bool inlined = false;
  std::string module;  // full path
};

// The sites of either run with one key, their costs summed per run.
struct SiteDiff {
  std::vector<SiteKeyFrame> key;
  SiteCosts base, head;
  size_t base_sites = 0, head_sites = 0;  // sites of each run with this key
  std::string allocating_function;
  std::vector<DiffFrame> frames;  // of the head's costliest site (the base's when only there)
  bool in_base() const { return base_sites > 0; }
  bool in_head() const { return head_sites > 0; }
  FigureChange change(CostKind cost) const;
};

struct RecordingDiff {
  const Report* base = nullptr;  // null for `check`: one recording, its figures on the head side
  const Report* head = nullptr;
  // Depth-first in the head's start order, then the base-only processes.
  std::vector<ProcessMatch> processes;
  // Sites of both runs; compared only when both have call paths.
  bool sites_compared = false;
  std::vector<SiteDiff> sites;
  SiteCosts base_site_totals, head_site_totals;
  // What makes the comparison less meaningful: different commands, format
  // versions, call paths in one run only.
  std::vector<std::string> notes;
  // The index in `notes` of "the recordings ran different commands", which
  // quotes both command lines (markdown shows them from the reports, as code).
  std::optional<size_t> commands_note;

  FigureChange total_change(Figure figure) const;
  // Indexes in `sites` whose `cost` changed (new and vanished sites
  // included), largest absolute change first (ties: larger head cost, then
  // key), at most `top` (0: all).
  std::vector<size_t> ranked_changes(CostKind cost, size_t top) const;
};

// Whether the profile has any call path (null: none).
bool has_call_paths(const Profile* profile);

// With call paths, the runtime's own blocks and suppressed leaks leave the
// leaked figures; without, nothing tells them apart. When only one recording
// has call paths, folds them back into its leaked figures, so that both
// count every block alike; returns whether it did.
bool count_leaks_alike(Report& base, const Profile* base_profile, Report& head, const Profile* head_profile);

// A profile may be null (not read); one without any call path counts as
// none. The diff refers to both reports: they must outlive it.
RecordingDiff diff_recordings(const Report& base, const Profile* base_profile, const Report& head,
                              const Profile* head_profile);

// The processes of one recording, in tree order, as unmatched entries on the
// head side (what `memtrack check` evaluates budgets on).
std::vector<ProcessMatch> process_tree(const Report& report);

// The key of a site of `profile` (exposed for tests).
std::vector<SiteKeyFrame> site_key(const Profile& profile, const ProfileSite& site);

}  // namespace memtrack
