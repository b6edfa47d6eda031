// The compact layout's contract (format/heap_runs.h) held against the heap
// replay: random traces with every awkward case (reused addresses, lost and
// unmatched frees, failed allocations and reallocs, forks copying blocks,
// execs, exits, pid reuse), written in the compact layout and read back,
// give the same report and the same sites' figures as the same trace with
// its allocation times rounded to the tick, with the real addresses.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "analyze/heap_replay.h"
#include "format/artifact.h"
#include "support/random_trace.h"
#include "support/test_support.h"
#include "support/trace_builder.h"

namespace memtrack {
namespace {

using testing::random_trace;
using testing::TempDir;
using testing::TraceBuilder;

constexpr uint64_t kTickNs = 10'000;  // the compact layout's, docs/FORMAT.md §2.7

void write_compact(const std::string& path, const std::vector<Event>& events, WriterOptions options) {
  options.layout = ArtifactLayout::Compact;
  ArtifactWriter writer(path, TraceBuilder::header(), options);
  writer.append(events);
  writer.finish(ArtifactTrailer{});
}

bool is_heap(EventType type) { return is_allocation(type) || type == EventType::Free; }

std::vector<Event> read_events(const std::string& path) {
  std::vector<Event> events;
  ReadResult result = read_artifact(path, [&](const Event& e) { events.push_back(e); });
  EXPECT_FALSE(result.error) << *result.error;
  EXPECT_TRUE(result.warnings.empty()) << result.warnings.front();
  return events;
}

struct Replayed {
  Report report;
  std::vector<SiteCosts> sites;
};
// The site of an allocation is its stack hash, or what `site_of_hash` says.
Replayed replay(const std::vector<Event>& events, const std::map<uint64_t, SiteId>& site_of_hash = {}) {
  HeapReplay replay({}, TraceBuilder::kStartNs);
  for (const Event& event : events) {
    auto mapped = site_of_hash.find(event.stack_hash);
    replay.on_event(event, mapped == site_of_hash.end() ? static_cast<SiteId>(event.stack_hash) : mapped->second);
  }
  replay.finish();
  return {replay.build_report(TraceBuilder::header(), ArtifactTrailer{}, {}), replay.site_costs()};
}

void expect_same_reports(const Replayed& expected, const Replayed& compact, uint64_t seed) {
  ASSERT_EQ(expected.report.processes.size(), compact.report.processes.size()) << "seed " << seed;
  for (size_t i = 0; i < expected.report.processes.size(); ++i)
    EXPECT_TRUE(expected.report.processes[i] == compact.report.processes[i]) << "seed " << seed << ", process " << i;
  EXPECT_TRUE(expected.report.totals == compact.report.totals) << "seed " << seed;
  EXPECT_EQ(expected.sites, compact.sites) << "seed " << seed;
}

TEST(CompactLayoutReplay, RandomTracesGiveTheSameFiguresAsWithTheirAddresses) {
  TempDir dir;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const TraceBuilder trace = random_trace(seed, seed % 2 == 0);
    // Small frames: the frame's tables start again often, block numbers cross.
    write_compact(dir.file("compact"), trace.events(), {.frame_events = 3, .flush_interval = {}});
    const std::vector<Event> compact = read_events(dir.file("compact"));
    ASSERT_EQ(compact.size(), trace.events().size()) << "seed " << seed;

    std::vector<Event> rounded = trace.events();
    std::map<uint64_t, SiteId> numbered_site;  // the compact layout numbers hashes in order of use
    for (size_t i = 0; i < rounded.size(); ++i) {
      Event& event = rounded[i];
      if (!is_heap(event.type)) continue;
      event.timestamp -= event.timestamp % kTickNs;
      EXPECT_EQ(compact[i].timestamp, event.timestamp) << "seed " << seed << ", event " << i;
      if (event.stack_hash != 0) numbered_site.try_emplace(compact[i].stack_hash, static_cast<SiteId>(event.stack_hash));
    }
    expect_same_reports(replay(rounded), replay(compact, numbered_site), seed);
  }
}

// The writer and the reader of a compact artifact agree on every kind of
// address part, case by case (the random traces above cover their mixes).
TEST(CompactLayoutReplay, EachAddressCaseReadsBack) {
  TempDir dir;
  TraceBuilder t;
  t.malloc(7, 7, 0x1000, 10).stack(5);     // block 1
  t.malloc(7, 7, 0x2000, 20).stack(9);     // block 2
  t.free(7, 7, 0x1000);                    // block 1
  t.free(7, 7, 0);                         // free(NULL)
  t.free(7, 7, 0x3000);                    // never seen
  t.malloc(7, 7, 0, 30);                   // failed
  t.realloc(7, 7, 0x2000, 0, 40);          // failed: block 2 stays
  t.malloc(7, 7, 0x2000, 50);              // at a live address: keeps block 2's key
  t.realloc(7, 7, 0x2000, 0x2000, 60);     // in place: a new block 3
  t.fork(7, 8);
  t.free(8, 8, 0x2000);                    // the child frees its copy of block 3
  t.exec(7, {"next"});
  t.free(7, 7, 0x2000);                    // gone with the exec: never seen
  t.free(7, 7, 0xc000000000000010);        // garbage with the top bit
  write_compact(dir.file("a"), t.events(), {.flush_interval = {}});
  const std::vector<Event> back = read_events(dir.file("a"));
  ASSERT_EQ(back.size(), t.events().size());
  auto key = [](uint64_t n) { return (uint64_t{1} << 63) | n; };
  EXPECT_EQ(back[0].addr, key(1));
  EXPECT_EQ(back[1].addr, key(2));
  EXPECT_EQ(back[2].addr, key(1));
  EXPECT_EQ(back[3].addr, 0u);
  EXPECT_EQ(back[4].addr, 0x3000u);
  EXPECT_EQ(back[5].addr, 0u);
  EXPECT_EQ(back[5].size, 30u);
  EXPECT_EQ(back[6].old_addr, key(2));
  EXPECT_EQ(back[6].addr, 0u);
  EXPECT_EQ(back[7].addr, key(2));
  EXPECT_EQ(back[8].old_addr, key(2));
  EXPECT_EQ(back[8].addr, key(3));
  EXPECT_EQ(back[10].addr, key(3));
  EXPECT_EQ(back[12].addr, 0x2000u);
  EXPECT_EQ(back[13].addr, 0xc000000000000010u | (uint64_t{1} << 62));
  // Hashes numbered in order of use; sizes and pids as written.
  EXPECT_EQ(back[0].stack_hash, 1u);
  EXPECT_EQ(back[1].stack_hash, 2u);
  EXPECT_EQ(back[0].size, 10u);
  EXPECT_EQ(back[10].pid, 8);
}


// Frees name blocks by rank among their site's live blocks; a block beyond
// the reach of ranks (a queue freed oldest first, or at random among
// thousands) is named by number: every order reads back the same figures.
TEST(CompactLayoutReplay, FreesInEveryOrderReadBack) {
  TempDir dir;
  std::mt19937_64 rng(7);
  for (const char* order : {"newest first", "oldest first", "random"}) {
    TraceBuilder t;
    constexpr uint64_t kBlocks = 3000;
    std::vector<uint64_t> addresses;
    for (uint64_t i = 0; i < kBlocks; ++i) {
      addresses.push_back(0x10000 + 32 * i);
      t.malloc(9, 9, addresses.back(), 24).stack(1 + i % 2);
    }
    if (std::string(order) == "newest first") std::reverse(addresses.begin(), addresses.end());
    if (std::string(order) == "random") std::shuffle(addresses.begin(), addresses.end(), rng);
    for (size_t i = 0; i < addresses.size(); ++i) {
      t.free(9, 9, addresses[i]);
      if (i % 7 == 0) t.malloc(9, 9, addresses[i], 24).stack(2);  // reused at once
    }
    write_compact(dir.file("a"), t.events(), {.flush_interval = {}});
    const std::vector<Event> back = read_events(dir.file("a"));
    ASSERT_EQ(back.size(), t.events().size()) << order;
    // Each free names the block its address held.
    std::map<uint64_t, uint64_t> key_at;
    for (size_t i = 0; i < back.size(); ++i) {
      const Event& written = t.events()[i];
      if (written.type == EventType::Malloc) {
        key_at[written.addr] = back[i].addr;
      } else {
        ASSERT_EQ(back[i].addr, key_at[written.addr]) << order << ", event " << i;
      }
    }
    std::vector<Event> rounded = t.events();
    for (Event& event : rounded) event.timestamp -= event.timestamp % kTickNs;
    expect_same_reports(replay(rounded), replay(back), 0);
  }
}

}  // namespace
}  // namespace memtrack
