// Reports for the HTML report's tests (html_report_test and the browser
// test's pages, html_report_pages): the hand-made sample profile, with a
// function name and a command line made of markup and quotes, and the same
// recording without call paths.
#pragma once

#include <string>

#include "analyze/report.h"
#include "unit/output/sample_profile.h"

namespace memtrack::testing {

// Must stay text on the page: script that would set window.pwned if it ran.
inline const std::string kHostileName = "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\">'";

inline Report sample_report() {
  Report report;
  report.header.command = {"./app", kHostileName, "--flag=\"quoted\""};
  report.events = 42;
  ProcessReport process;
  process.pid = 100;
  process.command = "./app " + kHostileName;
  process.figures.calls.malloc = 19;
  process.figures.free_calls = 12;
  process.figures.total_allocated = 5626;
  process.figures.peak_memory = 4406;
  process.figures.peak_time_ns = 1'500'000;
  process.figures.leaked_bytes = 4306;
  process.figures.leaked_count = 4;
  process.figures.temporary_allocations = 9;
  process.figures.duration_ns = 2'000'000'000;
  report.processes.push_back(process);
  report.totals = process.figures;
  report.exit_status = 0;
  report.counters = std::map<std::string, uint64_t>{{"events_lost", 0}, {"stacks_lost", 0}, {"ring_pauses", 3}};
  report.lost_events = 0;
  return report;
}

// sample_profile() with kHostileName as the function of the second site's
// make_widget frame.
inline Profile sample_profile_with_hostile_name() {
  Profile p = sample_profile();
  p.locations[3].frames[0].function = kHostileName;
  p.definitions_by_outcome[0] = 3;
  p.allocations_by_outcome[0] = 16;
  p.allocations_by_outcome[static_cast<int>(StackOutcome::NoStack)] = 3;
  return p;
}

// A recording without --stacks: one site without frames holding everything.
inline Profile profile_without_stacks() {
  Profile p;
  p.sites.push_back(make_site({}, make_costs(19, 5626, 4, 4306, 4406, 9)));
  p.totals = p.sites[0].costs;
  p.allocations_by_outcome[static_cast<int>(StackOutcome::NoStack)] = 19;
  return p;
}

}  // namespace memtrack::testing
