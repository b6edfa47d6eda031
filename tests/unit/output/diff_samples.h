// Two hand-made runs for the HTML diff's tests (diff_output_test and the
// browser test's pages, html_diff_pages): a parent and a child process in
// each, peak RSS recorded, and call paths that grew (grow), appeared (a
// function named with markup and quotes), vanished (removed) or stayed
// (steady); budgets that break, hold and cannot be evaluated.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "analyze/budget.h"
#include "analyze/recording_diff.h"
#include "output/diff/diff_output.h"

namespace memtrack::testing {

// Must stay text on the page: script that would set window.pwned if it ran.
inline const std::string kHostileFunction = "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\">'";

inline HeapFigures figures_of(uint64_t calls, uint64_t allocated, uint64_t peak, uint64_t leaked, uint64_t peak_rss) {
  HeapFigures f;
  f.calls.malloc = calls;
  f.free_calls = calls / 2;
  f.total_allocated = allocated;
  f.peak_memory = peak;
  f.leaked_bytes = leaked;
  f.leaked_count = leaked ? 1 : 0;
  f.temporary_allocations = calls / 3;
  f.peak_rss = peak_rss;
  return f;
}

// The command: "./app" and kHostileFunction as its argument; a child "worker".
inline Report run_of(int32_t first_pid, HeapFigures app, HeapFigures worker) {
  Report r;
  r.header.command = {"./app", kHostileFunction};
  r.header.format_version = 2;
  ProcessReport parent, child;
  parent.pid = first_pid;
  parent.command = "./app " + kHostileFunction;
  parent.exe = "/ci/build/app";
  parent.figures = app;
  child.pid = first_pid + 1;
  child.parent_pid = first_pid;
  child.command = "worker --fast";
  child.exe = "/ci/build/worker";
  child.start_time_ns = 1000;
  child.figures = worker;
  r.processes = {parent, child};
  r.totals = app;
  r.totals.calls.malloc += worker.calls.malloc;
  r.totals.free_calls += worker.free_calls;
  r.totals.total_allocated += worker.total_allocated;
  r.totals.peak_memory += worker.peak_memory;
  r.totals.leaked_bytes += worker.leaked_bytes;
  r.totals.leaked_count += worker.leaked_count;
  r.totals.temporary_allocations += worker.temporary_allocations;
  r.totals.peak_rss = *app.peak_rss + *worker.peak_rss;
  r.lost_events = 0;
  return r;
}

// Each site a call path of functions (innermost first) in /ci/build/app.
struct SampleSite {
  std::vector<std::string> functions;
  SiteCosts costs;
};
inline Profile profile_of_sites(const std::vector<SampleSite>& sites) {
  Profile p;
  p.modules.push_back({"/ci/build/app", "", 0x400000, 0x500000, 0, true});
  p.definitions_by_outcome[0] = sites.size();
  for (const SampleSite& s : sites) {
    ProfileSite site;
    site.outcome = StackOutcome::Complete;
    for (const std::string& function : s.functions) {
      ProfileLocation location;
      location.address = 0x401000 + 16 * p.locations.size();
      location.module = 0;
      location.frames.push_back({function, "/ci/src/app.c", 10 + static_cast<uint32_t>(p.locations.size()), 0, false,
                                 std::nullopt});
      site.locations.push_back(static_cast<uint32_t>(p.locations.size()));
      p.locations.push_back(location);
    }
    site.costs = s.costs;
    p.totals.add(s.costs);
    p.sites.push_back(site);
  }
  return p;
}

inline SiteCosts costs_of(uint64_t allocations, uint64_t bytes, uint64_t leaked) {
  SiteCosts c;
  c.allocations = allocations;
  c.allocated_bytes = bytes;
  c.leaked_allocations = leaked ? 1 : 0;
  c.leaked_bytes = leaked;
  c.peak_bytes = leaked;
  c.temporary_allocations = allocations / 2;
  return c;
}

// The diff of the two runs with its budgets, owning everything it points at.
struct SampleDiff {
  Report base = run_of(100, figures_of(30, 2289, 1077, 0, 8 << 20), figures_of(6, 600, 600, 0, 2 << 20));
  Report head = run_of(200, figures_of(27, 2012, 1400, 100, 9 << 20), figures_of(6, 600, 600, 0, 2 << 20));
  Profile base_profile = profile_of_sites({{{"grow", "main"}, costs_of(10, 1000, 0)},
                                           {{"removed", "main"}, costs_of(10, 777, 0)},
                                           {{"steady", "main"}, costs_of(5, 512, 0)}});
  Profile head_profile = profile_of_sites({{{"grow", "main"}, costs_of(10, 1400, 0)},
                                           {{kHostileFunction, "main"}, costs_of(1, 100, 100)},
                                           {{"steady", "main"}, costs_of(5, 512, 0)}});
  std::vector<Budget> budgets = {parse_budget("allocated>+10%", Budget::Kind::FailIf),
                                 parse_budget("peak_rss>+5%", Budget::Kind::FailIf),
                                 parse_budget("process(nosuch).peak>0", Budget::Kind::FailIf),
                                 parse_budget("each.leaked>+0", Budget::Kind::FailIf)};
  RecordingDiff diff;
  DiffView view;

  SampleDiff() {
    diff = diff_recordings(base, &base_profile, head, &head_profile);
    view.diff = &diff;
    view.base_file = "base.zst";
    view.head_file = "head.zst";
    for (const Budget& budget : budgets) view.budgets.push_back(evaluate_budget(budget, &base, head, diff.processes));
  }
  SampleDiff(const SampleDiff&) = delete;
  SampleDiff& operator=(const SampleDiff&) = delete;
};

// `memtrack check` of the head: one recording, budgets on absolute values.
struct SampleCheck {
  Report run = run_of(200, figures_of(27, 2012, 1400, 100, 9 << 20), figures_of(6, 600, 600, 0, 2 << 20));
  Budget budget = parse_budget("peak_rss<=10MiB", Budget::Kind::Max);
  RecordingDiff diff;
  DiffView view;

  SampleCheck() {
    diff.head = &run;
    diff.processes = process_tree(run);
    view.diff = &diff;
    view.head_file = "head.zst";
    view.budgets.push_back(evaluate_budget(budget, nullptr, run, diff.processes));
  }
  SampleCheck(const SampleCheck&) = delete;
  SampleCheck& operator=(const SampleCheck&) = delete;
};

}  // namespace memtrack::testing
