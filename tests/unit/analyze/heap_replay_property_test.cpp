// The heap replay's two views on random traces: for every seed, the sites'
// costs add up to the per-process totals, cost by cost, and a pid filter's
// sites add up to that pid's processes. Traces mix every record kind and the
// awkward cases: lost and unmatched frees, failed allocations and reallocs,
// realloc(p, 0), pid reuse, forks, execs and exits.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "analyze/heap_replay.h"
#include "support/trace_builder.h"

namespace memtrack {
namespace {

using testing::TraceBuilder;

// `forks_copy_blocks`: children of traced parents (who inherit live blocks),
// else only children of an untraced parent.
TraceBuilder random_trace(uint64_t seed, bool forks_copy_blocks) {
  std::mt19937_64 rng(seed);
  auto below = [&](uint64_t n) { return rng() % n; };
  TraceBuilder t;
  constexpr int32_t kPids = 4;
  // Few addresses per pid, so addresses are reused, blocks replaced and
  // frees unmatched.
  auto address = [&](int32_t pid) { return (uint64_t{static_cast<uint32_t>(pid)} << 20) + 16 * (1 + below(24)); };
  auto pid_at = [&] { return static_cast<int32_t>(100 + below(kPids)); };
  auto size = [&] { return below(10) == 0 ? 0 : 1 + below(4096); };
  auto stack = [&] { return below(8) == 0 ? 0 : 1 + below(12); };
  for (int i = 0; i < 2000; ++i) {
    const int32_t pid = pid_at();
    const int32_t tid = pid * 10 + static_cast<int32_t>(below(3));
    const uint64_t roll = below(100);
    const uint64_t addr = below(20) == 0 ? 0 : address(pid);  // 0: a failed allocation, or free(NULL)
    if (roll < 20) {
      t.malloc(pid, tid, addr, size()).stack(stack());
    } else if (roll < 27) {
      t.calloc(pid, tid, addr, size()).stack(stack());
    } else if (roll < 32) {
      t.aligned_alloc(pid, tid, addr, size()).stack(stack());
    } else if (roll < 45) {
      uint64_t old_addr = below(6) == 0 ? 0 : address(pid);
      t.realloc(pid, tid, old_addr, addr, size()).stack(stack());
    } else if (roll < 92) {
      t.free(pid, tid, addr);
    } else if (roll < 95) {
      t.fork(forks_copy_blocks ? pid_at() : 1, pid);
    } else if (roll < 97) {
      t.exec(pid, {"next"});
    } else {
      t.exit(pid, 0);
    }
  }
  return t;
}

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
