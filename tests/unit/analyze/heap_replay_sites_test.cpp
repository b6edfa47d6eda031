// Costs per call site from the heap replay: the figures heaptrack-style
// reports rank sites by.
#include <gtest/gtest.h>

#include <map>

#include "analyze/heap_replay.h"
#include "support/trace_builder.h"

namespace memtrack {
namespace {

using testing::TraceBuilder;

// The sites that had a selected allocation, by SiteId (the stack hash here).
std::map<SiteId, SiteCosts> costs_of(const TraceBuilder& trace, EventFilter filter = {}) {
  HeapReplay replay = trace.replay(std::move(filter));
  std::map<SiteId, SiteCosts> costs;
  for (size_t site = 0; site < replay.site_costs().size(); ++site)
    if (replay.site_costs()[site].allocations > 0) costs[static_cast<SiteId>(site)] = replay.site_costs()[site];
  return costs;
}

TEST(SiteCosts, CountsAllocationsAndBytesPerStack) {
  TraceBuilder t;
  t.malloc(1, 1, 0x1000, 10).stack(7).malloc(1, 1, 0x2000, 20).stack(7).calloc(1, 1, 0x3000, 5).stack(9);
  t.malloc(1, 1, 0x4000, 1);  // no stack
  auto costs = costs_of(t);
  EXPECT_EQ(costs[7].allocations, 2u);
  EXPECT_EQ(costs[7].allocated_bytes, 30u);
  EXPECT_EQ(costs[9].allocated_bytes, 5u);
  EXPECT_EQ(costs[0].allocations, 1u);
}

TEST(SiteCosts, PeakContributionIsWhatEachStackHadLiveAtTheLatestPeak) {
  TraceBuilder t;
  t.malloc(1, 1, 0x1000, 100).stack(1);
  t.malloc(1, 1, 0x2000, 200).stack(2);  // 300: a peak
  t.free(1, 1, 0x2000);
  t.malloc(1, 1, 0x3000, 250).stack(3);  // 350: the peak; stack 2 has nothing live then
  t.malloc(1, 1, 0x4000, 1).stack(1);    // 351: a new peak, stack 1 now 101
  t.free(1, 1, 0x4000);
  t.free(1, 1, 0x3000);
  t.malloc(1, 1, 0x5000, 50).stack(2);   // 150: below the peak
  auto costs = costs_of(t);
  EXPECT_EQ(t.replay().site_peak_time_ns(), 5 * TraceBuilder::kStepNs);
  EXPECT_EQ(costs[1].peak_bytes, 101u);
  EXPECT_EQ(costs[1].peak_allocations, 2u);
  EXPECT_EQ(costs[2].peak_bytes, 0u);
  EXPECT_EQ(costs[3].peak_bytes, 250u);
  EXPECT_EQ(costs[1].peak_bytes + costs[2].peak_bytes + costs[3].peak_bytes, 351u);
}

// `report --at T`: the peak figures hold what each site had live at T (the
// state after every record up to T), not at the peak.
TEST(SiteCosts, LiveAtAMomentReplacesThePeak) {
  TraceBuilder t;
  t.malloc(1, 1, 0x1000, 100).stack(1);  // 1 µs
  t.malloc(1, 1, 0x2000, 200).stack(2);  // 2 µs
  t.free(1, 1, 0x1000);                  // 3 µs
  t.malloc(1, 1, 0x3000, 1000).stack(3); // 4 µs: the peak, 1200
  t.free(1, 1, 0x3000);                  // 5 µs
  t.malloc(2, 2, 0x1000, 7).stack(1);    // 6 µs
  t.exit(2, 0);                          // 7 µs: its block leaked
  t.malloc(1, 1, 0x4000, 30).stack(3);   // 8 µs: live at the end
  const uint64_t step = TraceBuilder::kStepNs;
  auto live_at = [&](uint64_t ns, EventFilter filter = {}) {
    HeapReplay replay = t.replay(std::move(filter), ns);
    std::map<SiteId, std::pair<uint64_t, uint64_t>> live;
    for (size_t site = 0; site < replay.site_costs().size(); ++site) {
      const SiteCosts& c = replay.site_costs()[site];
      if (c.peak_bytes || c.peak_allocations) live[static_cast<SiteId>(site)] = {c.peak_bytes, c.peak_allocations};
    }
    EXPECT_EQ(replay.site_peak_time_ns(), ns);
    return live;
  };
  using Live = std::map<SiteId, std::pair<uint64_t, uint64_t>>;
  EXPECT_EQ(live_at(0), Live{}) << "before the first allocation";
  EXPECT_EQ(live_at(step), (Live{{1, {100, 1}}})) << "at an allocation's time it is live";
  EXPECT_EQ(live_at(2 * step + step / 2), (Live{{1, {100, 1}}, {2, {200, 1}}}));
  EXPECT_EQ(live_at(3 * step), (Live{{2, {200, 1}}})) << "freed at T";
  EXPECT_EQ(live_at(4 * step), (Live{{2, {200, 1}}, {3, {1000, 1}}})) << "the peak itself";
  EXPECT_EQ(live_at(6 * step), (Live{{1, {7, 1}}, {2, {200, 1}}})) << "another process";
  EXPECT_EQ(live_at(7 * step), (Live{{2, {200, 1}}})) << "its exit ended its block";
  EXPECT_EQ(live_at(100 * step), (Live{{2, {200, 1}}, {3, {30, 1}}}))
      << "after the last record: what was live at the end";
  // A window selects allocations, the moment what of them was live.
  EventFilter window;
  window.from_ns = 4 * step;
  window.to_ns = 8 * step;
  EXPECT_EQ(live_at(6 * step, window), (Live{{1, {7, 1}}})) << "inside --from/--to";
  EXPECT_EQ(live_at(2 * step, window), Live{}) << "before the window";
  // Without a moment: the peak, as before.
  HeapReplay peak = t.replay();
  EXPECT_EQ(peak.site_costs()[3].peak_bytes, 1000u);
  EXPECT_EQ(peak.site_costs()[1].peak_bytes, 0u);
}

TEST(SiteCosts, AnEarlyPeakIsKeptWhenEveryStackChangesAfterIt) {
  TraceBuilder t;
  t.malloc(1, 1, 0x1000, 1000).stack(1);
  t.malloc(1, 1, 0x2000, 10).stack(2);  // peak 1010
  t.free(1, 1, 0x1000);
  t.free(1, 1, 0x2000);
  t.malloc(1, 1, 0x3000, 5).stack(2);
  auto costs = costs_of(t);
  EXPECT_EQ(costs[1].peak_bytes, 1000u);
  EXPECT_EQ(costs[2].peak_bytes, 10u);
  EXPECT_EQ(costs[2].live_at_end_bytes, 5u);
}

TEST(SiteCosts, LeaksAtExitAndExecLiveAtTheEndOfTrace) {
  TraceBuilder t;
  t.malloc(1, 1, 0x1000, 10).stack(1).exec(1, {"next"});  // leaked by the exec
  t.malloc(1, 1, 0x2000, 20).stack(2).malloc(1, 1, 0x3000, 30).stack(2).free(1, 1, 0x3000);
  t.exit(1, 0);  // 0x2000 leaked at exit
  t.malloc(2, 2, 0x1000, 40).stack(3);  // live at the end: process 2 runs on
  auto costs = costs_of(t);
  EXPECT_EQ(costs[1].leaked_bytes, 10u);
  EXPECT_EQ(costs[2].leaked_bytes, 20u);
  EXPECT_EQ(costs[2].leaked_allocations, 1u);
  EXPECT_EQ(costs[2].live_at_end_bytes, 0u);
  EXPECT_EQ(costs[3].leaked_bytes, 0u);
  EXPECT_EQ(costs[3].live_at_end_bytes, 40u);
  EXPECT_EQ(costs[3].live_at_end_allocations, 1u);
}

// The leaks of the runtime's sites and of suppressed ones leave the figures
// of their process and the totals, counted apart (what `check leaked<=0`
// reads): per process, even for blocks the filter did not select.
TEST(SiteCosts, ExcludedLeaksLeaveTheFiguresOfTheirProcess) {
  TraceBuilder t;
  t.malloc(1, 1, 0x1000, 10).stack(1).malloc(1, 1, 0x2000, 20).stack(2).exit(1, 0);
  t.malloc(2, 2, 0x1000, 40).stack(2).malloc(2, 2, 0x2000, 80).stack(3).malloc(2, 2, 0x3000, 160).stack(4);
  t.exit(2, 0);
  EventFilter first_only;
  first_only.pids = {1};
  HeapReplay replay = t.replay(first_only);
  Report report = replay.build_report(t.header(), ArtifactTrailer{}, {});
  ASSERT_EQ(report.processes.size(), 2u);
  EXPECT_EQ(report.totals.leaked_bytes, 310u);
  replay.exclude_leaks(report, /*runtime_sites=*/{2}, /*suppressed_sites=*/{3});
  const HeapFigures& first = report.processes[0].figures;
  const HeapFigures& second = report.processes[1].figures;
  EXPECT_EQ(first.leaked_bytes, 10u);
  EXPECT_EQ(first.runtime_held_bytes, 20u);
  EXPECT_EQ(second.leaked_bytes, 160u);
  EXPECT_EQ(second.leaked_count, 1u);
  EXPECT_EQ(second.runtime_held_bytes, 40u) << "a block the filter left out is still its process's";
  EXPECT_EQ(second.suppressed_leaked_bytes, 80u);
  EXPECT_EQ(report.totals.leaked_bytes, 170u);
  EXPECT_EQ(report.totals.leaked_count, 2u);
  EXPECT_EQ(report.totals.runtime_held_bytes, 60u);
  EXPECT_EQ(report.totals.runtime_held_count, 2u);
  EXPECT_EQ(report.totals.suppressed_leaked_bytes, 80u);
}

TEST(SiteCosts, TemporaryMeansFreedBeforeTheThreadAllocatedAgain) {
  TraceBuilder t;
  t.malloc(1, 1, 0x1000, 64).stack(1).free(1, 1, 0x1000);  // temporary
  t.malloc(1, 1, 0x2000, 64).stack(2).malloc(1, 1, 0x3000, 8).stack(3);
  t.free(1, 1, 0x2000);  // not: the thread allocated 0x3000 in between
  t.malloc(1, 2, 0x4000, 16).stack(4).malloc(1, 1, 0x5000, 8).stack(3);
  t.free(1, 1, 0x4000);  // temporary: thread 2 allocated nothing since
  auto costs = costs_of(t);
  EXPECT_EQ(costs[1].temporary_allocations, 1u);
  EXPECT_EQ(costs[1].temporary_bytes, 64u);
  EXPECT_EQ(costs[2].temporary_allocations, 0u);
  EXPECT_EQ(costs[4].temporary_allocations, 1u);
}

TEST(SiteCosts, ReallocFreesTheOldBlockAndAllocatesTheNew) {
  TraceBuilder t;
  t.malloc(1, 1, 0x1000, 10).stack(1).realloc(1, 1, 0x1000, 0x2000, 100).stack(2);
  t.exit(1, 0);
  auto costs = costs_of(t);
  EXPECT_EQ(costs[1].leaked_bytes, 0u);
  EXPECT_EQ(costs[1].temporary_allocations, 0u);
  EXPECT_EQ(costs[2].leaked_bytes, 100u);
}

TEST(SiteCosts, FiltersSelectAllocationsAndHideTheirFrees) {
  TraceBuilder t;
  t.malloc(1, 1, 0x1000, 10).stack(1);  // t = 1 step
  t.malloc(2, 2, 0x1000, 20).stack(1);  // other process
  t.malloc(1, 3, 0x2000, 30).stack(2);  // other thread
  t.malloc(1, 1, 0x3000, 40).stack(3);  // t = 4 steps
  t.free(2, 2, 0x1000);
  t.exit(1, 0).exit(2, 0);
  EventFilter by_pid;
  by_pid.pids = {1};
  auto costs = costs_of(t, by_pid);
  EXPECT_EQ(costs[1].allocated_bytes, 10u);
  EXPECT_EQ(costs[1].leaked_bytes, 10u);
  EventFilter by_tid;
  by_tid.tids = {2};
  costs = costs_of(t, by_tid);
  EXPECT_EQ(costs[1].allocated_bytes, 20u);
  EXPECT_EQ(costs[1].leaked_bytes, 0u);
  EXPECT_FALSE(costs.contains(2));
  EventFilter window;
  window.from_ns = 2 * TraceBuilder::kStepNs;
  window.to_ns = 3 * TraceBuilder::kStepNs;
  costs = costs_of(t, window);
  EXPECT_EQ(costs[1].allocated_bytes, 20u);
  EXPECT_EQ(costs[2].allocated_bytes, 30u);
  EXPECT_FALSE(costs.contains(3));
}

// A Fork for a pid still running (its Exit was lost) ends the old process:
// its blocks are leaks, not blocks of the new one.
TEST(SiteCosts, AForkOfARunningPidEndsTheOldProcess) {
  TraceBuilder t;
  t.malloc(100, 100, 0x10, 100).stack(1).fork(1, 100).malloc(100, 100, 0x10, 5).stack(2).exit(100, 0);
  auto costs = costs_of(t);
  EXPECT_EQ(costs[1].leaked_bytes, 100u);
  EXPECT_EQ(costs[2].leaked_bytes, 5u);
  EXPECT_EQ(t.report().totals.leaked_bytes, 105u) << "the per-process figures agree";
}

}  // namespace
}  // namespace memtrack
