// The timeline (analyze/timeline.h): bounded buckets that keep every
// bucket's minimum and maximum, exact peaks, mapped bytes from the mapping
// records, RSS by member, the --from/--to window (its outputs:
// tests/unit/output/timeline_output_test.cpp).
#include <gtest/gtest.h>

#include "analyze/timeline.h"

namespace memtrack {
namespace {

constexpr uint64_t kStart = 1'000'000'000;
constexpr uint64_t kMs = 1'000'000;

Event event(EventType type, uint64_t ms, int32_t pid = 7) {
  Event e;
  e.type = type;
  e.pid = e.tid = pid;
  e.timestamp = kStart + ms * kMs;
  return e;
}

Event rss(uint64_t ms, RssMember member, uint64_t bytes) {
  Event e = event(EventType::Rss, ms);
  e.member = static_cast<int32_t>(member);
  e.size = bytes;
  return e;
}

Event mapping(EventType type, uint64_t ms, uint64_t addr, uint64_t size) {
  Event e = event(type, ms);
  e.addr = addr;
  e.size = size;
  return e;
}

size_t s(Series series) { return static_cast<size_t>(series); }

TEST(Timeline, APidTakenAgainAfterAnExitIsAnotherProcess) {
  TimelineBuilder builder({}, kStart);
  builder.on_event(event(EventType::Malloc, 1, 7), 5000);
  builder.on_event(event(EventType::Exit, 2, 7), 0);
  builder.on_event(event(EventType::Malloc, 3, 8), 100);  // another process between them
  builder.on_event(event(EventType::Malloc, 4, 7), 300);  // pid 7 again: a new process
  Timeline t = builder.build();
  ASSERT_EQ(t.processes.size(), 3u);
  EXPECT_EQ(t.processes[0].pid, 7);
  EXPECT_EQ(t.processes[0].peaks[s(Series::Heap)].bytes, 5000u);
  EXPECT_EQ(t.processes[2].pid, 7);
  EXPECT_EQ(t.processes[2].peaks[s(Series::Heap)].bytes, 300u);

  TimelineBuilder back_to_back({}, kStart);  // no other process's event in between
  back_to_back.on_event(event(EventType::Malloc, 1, 7), 5000);
  back_to_back.on_event(event(EventType::Exit, 2, 7), 0);
  back_to_back.on_event(event(EventType::Malloc, 3, 7), 300);
  Timeline u = back_to_back.build();
  ASSERT_EQ(u.processes.size(), 2u);
  EXPECT_EQ(u.processes[1].peaks[s(Series::Heap)].bytes, 300u);
}

TEST(Timeline, DownsamplingKeepsTheNarrowPeakAndItsTime) {
  TimelineBuilder builder({.max_points = 50, .max_process_points = 20}, kStart);
  // 10 s of a slowly varying heap, with one 1 ms spike at 6.123 s.
  for (uint64_t ms = 0; ms < 10'000; ms += 3) builder.on_event(event(EventType::Malloc, ms), 1000 + ms % 7);
  builder.on_event(event(EventType::Malloc, 6123), 50'000);
  builder.on_event(event(EventType::Free, 6124), 1000);
  Timeline t = builder.build();
  EXPECT_LE(t.total.buckets.size(), 50u);
  EXPECT_LE(t.processes.at(0).buckets.size(), 20u);
  EXPECT_EQ(t.total.peaks[s(Series::Heap)].bytes, 50'000u);
  EXPECT_EQ(t.total.peaks[s(Series::Heap)].time_ns, 6123 * kMs);
  uint64_t highest = 0, lowest = UINT64_MAX;
  for (const TimelineBucket& b : t.total.buckets) {
    highest = std::max(highest, b.max[s(Series::Heap)]);
    if (b.start_ns > 0) lowest = std::min(lowest, b.min[s(Series::Heap)]);
  }
  EXPECT_EQ(highest, 50'000u) << "the spike survives downsampling in its bucket's maximum";
  EXPECT_EQ(lowest, 1000u);
  uint64_t allocations = 0;
  for (const TimelineBucket& b : t.total.buckets) allocations += b.allocations;
  EXPECT_EQ(allocations, 3335u);
}

TEST(Timeline, MappedBytesFollowTheProgramsOwnMappings) {
  TimelineBuilder builder({}, kStart);
  const uint64_t mib = 1 << 20, base = 0x7f00'0000'0000;
  builder.on_event(mapping(EventType::Mmap, 1, base, 64 * mib), 0);
  builder.on_event(mapping(EventType::Munmap, 2, base + 16 * mib, 16 * mib), 0);  // a hole
  builder.on_event(mapping(EventType::Munmap, 3, 0x1000, 4096), 0);              // not its own
  Event remap = mapping(EventType::Mremap, 4, base + 48 * mib, 32 * mib);
  remap.old_addr = base + 32 * mib;  // its last 32 MiB move
  remap.old_size = 32 * mib;
  builder.on_event(remap, 0);
  Event brk = event(EventType::Brk, 5);
  brk.old_addr = 0x5555'0000'0000;
  brk.addr = brk.old_addr + 2 * mib;
  builder.on_event(brk, 0);
  Timeline t = builder.build();
  const ProcessTimeline& p = t.processes.at(0);
  auto last_at = [&](uint64_t ms) { return p.buckets.at(ms).last[s(Series::Mapped)]; };
  EXPECT_EQ(last_at(1), 64 * mib);
  EXPECT_EQ(last_at(2), 48 * mib);
  EXPECT_EQ(last_at(3), 48 * mib);
  EXPECT_EQ(last_at(4), 48 * mib);
  EXPECT_EQ(last_at(5), 50 * mib);
  EXPECT_EQ(p.peaks[s(Series::Mapped)].bytes, 64 * mib);
  EXPECT_TRUE(p.has_mapped);
}

TEST(Timeline, RssIsTheSumOfItsResidentMembersAndEndsAtExit) {
  TimelineBuilder builder({}, kStart);
  builder.on_event(rss(1, RssMember::Anon, 3000), 100);
  builder.on_event(rss(2, RssMember::File, 5000), 100);
  builder.on_event(rss(3, RssMember::Swap, 7000), 100);
  builder.on_event(event(EventType::Exit, 4), 0);
  Timeline t = builder.build();
  const ProcessTimeline& p = t.processes.at(0);
  EXPECT_EQ(p.buckets.at(3).last[s(Series::Rss)], 8000u) << "swapped pages are not resident";
  EXPECT_EQ(p.buckets.at(4).last[s(Series::Rss)], 0u);
  EXPECT_EQ(p.peaks[s(Series::Rss)].bytes, 8000u);
  EXPECT_EQ(p.peaks[s(Series::Rss)].time_ns, 2 * kMs);
  ASSERT_TRUE(p.rss_to_heap());
  EXPECT_DOUBLE_EQ(*p.rss_to_heap(), 80.0);
}

// memtrack's own memory (OwnMemory records) is a pair of series apart: the
// program's RSS and mapped bytes never include it; both restart at exec.
TEST(Timeline, MemtracksOwnMemoryIsASeriesApartThatRestartsAtExec) {
  TimelineBuilder builder({}, kStart);
  auto own = [](uint64_t ms, int32_t member, uint64_t bytes) {
    Event e = event(EventType::OwnMemory, ms);
    e.member = member;
    e.size = bytes;
    return e;
  };
  builder.on_event(rss(1, RssMember::Anon, 3000), 0);
  builder.on_event(own(2, kOwnMappedMember, 1 << 20), 0);
  builder.on_event(own(3, static_cast<int32_t>(RssMember::Shmem), 8192), 0);
  builder.on_event(own(4, static_cast<int32_t>(RssMember::Anon), 4096), 0);
  builder.on_event(event(EventType::Exec, 5), 0);
  Timeline t = builder.build();
  const ProcessTimeline& p = t.processes.at(0);
  EXPECT_TRUE(p.has_own);
  EXPECT_EQ(p.buckets.at(4).last[s(Series::MemtrackRss)], 12288u) << "its members add up";
  EXPECT_EQ(p.buckets.at(4).last[s(Series::MemtrackMapped)], 1u << 20);
  EXPECT_EQ(p.buckets.at(4).last[s(Series::Rss)], 3000u) << "the program's RSS leaves it out";
  EXPECT_EQ(p.buckets.at(4).last[s(Series::Mapped)], 0u);
  EXPECT_EQ(p.buckets.at(5).last[s(Series::MemtrackRss)], 0u) << "a new image";
  EXPECT_EQ(p.buckets.at(5).last[s(Series::MemtrackMapped)], 0u);
  EXPECT_EQ(p.peaks[s(Series::MemtrackRss)].bytes, 12288u);
}

TEST(Timeline, TheWindowCarriesTheStateInAndStopsAtItsEnd) {
  TimelineBuilder builder({.from_ns = 10 * kMs, .to_ns = 20 * kMs}, kStart);
  builder.on_event(rss(1, RssMember::Anon, 9999), 0);  // before: the peak is not in the window
  builder.on_event(rss(5, RssMember::Anon, 100), 0);
  builder.on_event(rss(12, RssMember::Anon, 300), 0);
  builder.on_event(rss(30, RssMember::Anon, 5000), 0);  // after
  Timeline t = builder.build();
  EXPECT_EQ(t.total.peaks[s(Series::Rss)].bytes, 300u);
  ASSERT_FALSE(t.total.buckets.empty());
  EXPECT_EQ(t.total.buckets.front().start_ns, 10 * kMs);
  EXPECT_EQ(t.total.buckets.front().min[s(Series::Rss)], 100u) << "the state at the window's start";
  EXPECT_LE(t.total.buckets.back().start_ns, 20 * kMs);
}

// Each call site's selected allocations per slice of time: whole buckets of
// the total, at most site_slices of them, coarsened as the run grows, every
// allocation counted once, unselected ones (no site given) left out.
TEST(Timeline, SiteSlicesCountEachSitesAllocationsInWholeBuckets) {
  TimelineBuilder builder({.max_points = 100, .max_process_points = 20, .site_slices = 16}, kStart);
  auto alloc = [&](uint64_t ms, uint64_t size, std::optional<uint32_t> site) {
    Event e = event(EventType::Malloc, ms);
    e.size = size;
    builder.on_event(e, 0, site);
  };
  uint64_t bytes_of_1 = 0, count_of_1 = 0;
  for (uint64_t ms = 0; ms < 3000; ms += 7) {
    alloc(ms, 10 + ms, 1);
    bytes_of_1 += 10 + ms;
    ++count_of_1;
  }
  alloc(2500, 1'000'000, 3);
  alloc(2000, 77, 3);  // a late record: goes before, in its own slice
  alloc(1000, 5, std::nullopt);  // not selected
  Timeline t = builder.build();
  ASSERT_EQ(t.sites.by_site.size(), 4u);
  EXPECT_TRUE(t.sites.by_site[0].empty() && t.sites.by_site[2].empty());
  EXPECT_EQ(t.sites.slice_ns % t.total.bucket_ns, 0u) << "a slice is whole buckets";
  EXPECT_LT(2999 * kMs / t.sites.slice_ns, 16u) << "at most 16 slices";
  uint64_t bytes = 0, count = 0, previous = 0;
  for (const SiteSlice& s : t.sites.by_site[1]) {
    EXPECT_GE(s.slice, previous) << "in slice order";
    previous = s.slice;
    bytes += s.bytes;
    count += s.allocations;
  }
  EXPECT_EQ(bytes, bytes_of_1);
  EXPECT_EQ(count, count_of_1);
  const std::vector<SiteSlice>& late = t.sites.by_site[3];
  ASSERT_EQ(late.size(), 2u);
  EXPECT_EQ(late[0].slice, 2000 * kMs / t.sites.slice_ns);
  EXPECT_EQ(late[0].bytes, 77u);
  EXPECT_EQ(late[1].slice, 2500 * kMs / t.sites.slice_ns);
  uint64_t all = 0;
  for (const TimelineBucket& b : t.total.buckets) all += b.allocations;
  EXPECT_EQ(all, count_of_1 + 3) << "the total's allocation rate counts every allocation";
  TimelineBuilder without({}, kStart);
  without.on_event(event(EventType::Malloc, 1), 0, 1);
  EXPECT_TRUE(without.build().sites.by_site.empty()) << "not asked for: none kept";
}

}  // namespace
}  // namespace memtrack
