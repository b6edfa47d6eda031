// The heap replay's two views on random traces: for every seed, the sites'
// costs add up to the per-process totals, cost by cost, and a pid filter's
// sites add up to that pid's processes. Traces mix every record kind and the
// awkward cases: lost and unmatched frees, failed allocations and reallocs,
// realloc(p, 0), pid reuse, forks, execs and exits.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "analyze/heap_replay.h"
#include "support/random_trace.h"
#include "support/trace_builder.h"

namespace memtrack {
namespace {

using testing::random_trace;
using testing::TraceBuilder;

SiteCosts sum(const std::vector<SiteCosts>& sites) {
  SiteCosts total;
  for (const SiteCosts& site : sites) total.add(site);
  return total;
}

void expect_sites_add_up(const SiteCosts& sites, const HeapFigures& processes, uint64_t seed) {
  EXPECT_EQ(sites.allocations, processes.alloc_calls()) << "seed " << seed;
  EXPECT_EQ(sites.allocated_bytes, processes.total_allocated) << "seed " << seed;
  EXPECT_EQ(sites.leaked_bytes, processes.leaked_bytes) << "seed " << seed;
  EXPECT_EQ(sites.leaked_allocations, processes.leaked_count) << "seed " << seed;
  EXPECT_EQ(sites.temporary_allocations, processes.temporary_allocations) << "seed " << seed;
}

TEST(HeapReplayProperty, SiteSumsEqualProcessTotals) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const bool forks_copy_blocks = seed % 2 == 0;
    TraceBuilder t = random_trace(seed, forks_copy_blocks);
    HeapReplay replay = t.replay();
    Report report = replay.build_report(TraceBuilder::header(), ArtifactTrailer{}, {});
    const SiteCosts sites = sum(replay.site_costs());
    expect_sites_add_up(sites, report.totals, seed);
    ASSERT_GT(sites.temporary_allocations, 0u) << "seed " << seed << ": the generator makes temporaries";
    ASSERT_GT(sites.leaked_allocations, 0u) << "seed " << seed;
    if (forks_copy_blocks) {
      // Inherited copies are live in the child too, but they are the
      // parent's allocations: the processes' peak counts them, the sites not.
      EXPECT_LE(sites.peak_bytes, report.totals.peak_memory) << "seed " << seed;
    } else {
      EXPECT_EQ(sites.peak_bytes, report.totals.peak_memory) << "seed " << seed;
      EXPECT_EQ(replay.site_peak_time_ns(), report.totals.peak_time_ns.value_or(0)) << "seed " << seed;
    }
    EXPECT_LE(sites.peak_allocations, sites.allocations) << "seed " << seed;
    EXPECT_LE(sites.temporary_bytes, sites.allocated_bytes) << "seed " << seed;
  }
}

TEST(HeapReplayProperty, APidFiltersSitesAddUpToThatPidsProcesses) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    TraceBuilder t = random_trace(seed, true);
    Report report = t.report();
    for (int32_t pid = 100; pid < 104; ++pid) {
      EventFilter only;
      only.pids = {pid};
      const SiteCosts sites = sum(t.replay(only).site_costs());
      HeapFigures processes;
      for (const ProcessReport& process : report.processes) {
        if (process.pid != pid) continue;
        processes.calls.malloc += process.figures.calls.malloc;
        processes.calls.calloc += process.figures.calls.calloc;
        processes.calls.realloc += process.figures.calls.realloc;
        processes.calls.aligned_alloc += process.figures.calls.aligned_alloc;
        processes.total_allocated += process.figures.total_allocated;
        processes.leaked_bytes += process.figures.leaked_bytes;
        processes.leaked_count += process.figures.leaked_count;
        processes.temporary_allocations += process.figures.temporary_allocations;
      }
      expect_sites_add_up(sites, processes, seed);
    }
  }
}

}  // namespace
}  // namespace memtrack
