// Valgrind massif's output file (massif.out), for ms_print and
// massif-visualizer: snapshots of the heap over time from the timeline, and
// one detailed snapshot at the heap's peak whose tree is the call paths'
// bytes live at the peak, from the allocator's callers outwards (the
// bottom-up call tree). Format: Valgrind's massif/ms_print; checked with
// Debian's ms_print (tests/integration/exports_test.cpp).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analyze/call_tree.h"
#include "output/output.h"

namespace memtrack {
namespace {

constexpr size_t kMaxSnapshots = 100;  // massif's default --max-snapshots
constexpr double kThresholdPercent = 1.0;  // massif's default --threshold

// ms_print drops everything after a '#' as a comment, and reads lines.
std::string massif_text(std::string text) {
  for (char& c : text)
    if (c == '#' || c == '\n') c = ' ';
  return text;
}

struct Snapshot {
  uint64_t time_ns = 0;
  uint64_t heap = 0;
  bool peak = false;
};

// The series the snapshots follow: the one process the sites belong to
// when there is one (--pid), else the total.
const ProcessTimeline* series_of(const ReportModel& model) {
  if (!model.timeline) return nullptr;
  std::set<int32_t> pids;
  for (const ProfileSite& site : model.profile.sites)
    if (site.costs.allocations > 0) pids.insert(site.pid);
  const ProcessTimeline* one = nullptr;
  if (pids.size() == 1 && *pids.begin() != 0)
    for (const ProcessTimeline& process : model.timeline->processes)
      if (process.pid == *pids.begin()) {
        if (one) return &model.timeline->total;  // a reused pid: two incarnations
        one = &process;
      }
  return one ? one : &model.timeline->total;
}

std::vector<Snapshot> snapshots_of(const ProcessTimeline* series) {
  std::vector<Snapshot> snapshots{{}};  // massif starts with an empty heap at time 0
  if (!series) return snapshots;
  const size_t heap = static_cast<size_t>(Series::Heap);
  const std::vector<TimelineBucket>& buckets = series->buckets;
  // Each snapshot: the heap at the end of a run of buckets (its last value).
  size_t per_snapshot = (buckets.size() + kMaxSnapshots - 3) / (kMaxSnapshots - 2);
  per_snapshot = std::max<size_t>(per_snapshot, 1);
  for (size_t end = per_snapshot; end - per_snapshot < buckets.size(); end += per_snapshot) {
    size_t last = std::min(end, buckets.size()) - 1;
    snapshots.push_back({buckets[last].start_ns + series->bucket_ns, buckets[last].last[heap], false});
  }
  const SeriesPeak& peak = series->peaks[heap];
  if (peak.time_ns) {
    Snapshot at_peak{*peak.time_ns, peak.bytes, true};
    auto after = std::upper_bound(snapshots.begin() + 1, snapshots.end(), at_peak.time_ns,
                                  [](uint64_t t, const Snapshot& s) { return t < s.time_ns; });
    snapshots.insert(after, at_peak);
  }
  return snapshots;
}

class TreeWriter {
 public:
  TreeWriter(std::string& out, uint64_t total) : out_(out), total_(total) {}

  // A node and its children down to massif's threshold; the children below
  // it are one "in N places" node, as massif writes them.
  void write(const CallTreeNode& node, const std::string& details, int depth) {
    std::vector<const CallTreeNode*> shown;
    uint64_t below = 0, below_count = 0;
    for (const CallTreeNode& child : node.children) {
      if (child.cost == 0) continue;
      if (static_cast<double>(child.cost) * 100.0 >= kThresholdPercent * static_cast<double>(total_)) {
        shown.push_back(&child);
      } else {
        below += child.cost;
        ++below_count;
      }
    }
    // What the node has beyond its children: its own allocations (a path
    // ending here) are not a child in massif's tree either.
    out_ += fmt::format("{:{}}n{}: {} {}\n", "", depth, shown.size() + (below_count ? 1 : 0), node.cost,
                        massif_text(details));
    for (const CallTreeNode* child : shown)
      write(*child, child->label.starts_with("(") ? child->label : "0x0: " + child->label, depth + 1);
    if (below_count)
      out_ += fmt::format("{:{}}n0: {} in {} place{}, all below massif's threshold (1.00%)\n", "", depth + 1, below,
                          below_count, below_count == 1 ? "" : "s");
  }

 private:
  std::string& out_;
  uint64_t total_;
};

void write_massif(const ReportModel& model, std::ostream& sink) {
  const Profile& profile = model.profile;
  std::string out;
  out += "desc: memtrack: the heap over time and the call paths live at its peak (docs/REPORT.md, massif)\n";
  out += "cmd: " + massif_text(profile.command.empty() ? "memtrack" : profile.command) + "\n";
  out += "time_unit: ms\n";
  CallTreeNode tree = build_call_tree(profile, CostKind::Peak, TreeDirection::BottomUp);
  std::vector<Snapshot> snapshots = snapshots_of(series_of(model));
  for (size_t n = 0; n < snapshots.size(); ++n) {
    const Snapshot& s = snapshots[n];
    // The sites' bytes can only fall short of the heap (blocks inherited at
    // fork, allocations the filters left out); never exceed it for ms_print.
    uint64_t heap = s.peak ? std::max(s.heap, tree.cost) : s.heap;
    out += fmt::format("#-----------\nsnapshot={}\n#-----------\ntime={}\nmem_heap_B={}\nmem_heap_extra_B=0\n"
                       "mem_stacks_B=0\nheap_tree={}\n",
                       n, s.time_ns / 1'000'000, heap, s.peak ? "peak" : "empty");
    if (!s.peak) continue;
    // The root: every live block; the sites' share below it, the rest in
    // one node of its own.
    CallTreeNode root{"", heap, std::move(tree.children)};
    if (heap > tree.cost)
      root.children.push_back({"(live blocks in no call path here: inherited at fork, or not selected)",
                               heap - tree.cost, {}});
    TreeWriter(out, heap).write(root, "(heap allocation functions) malloc/new/new[], --alloc-fns, etc.", 0);
  }
  sink << out;
  sink.flush();
  if (!sink) throw std::runtime_error("massif output: writing the file failed");
}

}  // namespace

extern const OutputFormat kMassifOutput{
    .name = "massif",
    .summary = "a Valgrind massif.out: the heap over time and the call paths at its peak, for ms_print, massif-visualizer",
    .noun = "massif file",
    .carries_notes = false,
    .sites_by_thread = true,  // to follow one process's heap with --pid
    .write = [](const ReportModel& model, const OutputOptions&, std::ostream& sink) { write_massif(model, sink); }};

}  // namespace memtrack
