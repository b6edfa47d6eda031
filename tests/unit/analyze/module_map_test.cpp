// ModuleMap: placements with time ranges from synthetic Mapping, Fork, Exec
// and Exit sequences, one rule per test (module_map.h lists them).
#include "analyze/module_map.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace memtrack {
namespace {

constexpr int32_t kPid = 100;

Event mapping(int32_t pid, uint64_t timestamp, uint64_t start, uint64_t len, const std::string& path,
              bool new_image = false) {
  auto info = std::make_shared<MappingInfo>();
  info->len = len;
  info->file_offset = 0x1000;
  info->build_id = {0xbe, 0xef};
  info->prot = 5;
  info->path = path;
  info->new_image = new_image;
  Event event;
  event.type = EventType::Mapping;
  event.pid = event.tid = pid;
  event.timestamp = timestamp;
  event.addr = start;
  event.mapping = std::move(info);
  return event;
}

Event lifecycle(EventType type, int32_t pid, uint64_t timestamp, int32_t parent_pid = 0) {
  Event event;
  event.type = type;
  event.pid = event.tid = pid;
  event.timestamp = timestamp;
  event.parent_pid = parent_pid;
  return event;
}

ModuleMap replay(const std::vector<Event>& events) {
  ModuleMap map;
  for (const Event& event : events) map.on_event(event);
  return map;
}

// The path of the placement at (pid, address, timestamp), or "none".
std::string file_at(const ModuleMap& map, int32_t pid, uint64_t address, uint64_t timestamp) {
  const Placement* placement = map.placement_at(pid, address, timestamp);
  return placement ? placement->mapping->path : "none";
}

TEST(ModuleMap, AMappingCoversItsRangeFromItsTime) {
  ModuleMap map = replay({mapping(kPid, 10, 0x1000, 0x2000, "/lib/a.so")});
  EXPECT_EQ(file_at(map, kPid, 0x1000, 10), "/lib/a.so");
  EXPECT_EQ(file_at(map, kPid, 0x2fff, 1000), "/lib/a.so");
  EXPECT_EQ(file_at(map, kPid, 0x3000, 10), "none");  // end is exclusive
  EXPECT_EQ(file_at(map, kPid, 0xfff, 10), "none");
  EXPECT_EQ(file_at(map, kPid, 0x1000, 9), "none");  // before it was mapped
  EXPECT_EQ(file_at(map, kPid + 1, 0x1000, 10), "none");

  ASSERT_EQ(map.placements(kPid).size(), 1u);
  const Placement& placement = map.placements(kPid)[0];
  EXPECT_EQ(placement.start, 0x1000u);
  EXPECT_EQ(placement.end, 0x3000u);
  EXPECT_EQ(placement.from_ns, 10u);
  EXPECT_EQ(placement.to_ns, Placement::kOpen);
  EXPECT_EQ(placement.mapping->file_offset, 0x1000u);
  EXPECT_EQ(placement.mapping->build_id, (std::vector<uint8_t>{0xbe, 0xef}));
  EXPECT_TRUE(map.placements(kPid + 1).empty());
}

// dlclose leaves no record; the library mapped again elsewhere is a second
// placement, and the first still answers for its own time.
TEST(ModuleMap, ALibraryMappedAgainElsewhereKeepsBothPlacements) {
  ModuleMap map = replay({mapping(kPid, 10, 0x10000, 0x1000, "/lib/a.so"),
                          mapping(kPid, 20, 0x30000, 0x1000, "/lib/b.so"),
                          mapping(kPid, 30, 0x50000, 0x1000, "/lib/a.so")});
  ASSERT_EQ(map.placements(kPid).size(), 3u);
  EXPECT_EQ(file_at(map, kPid, 0x10800, 15), "/lib/a.so");
  EXPECT_EQ(file_at(map, kPid, 0x50800, 35), "/lib/a.so");
  EXPECT_EQ(file_at(map, kPid, 0x50800, 25), "none");
  EXPECT_EQ(map.placement_at(kPid, 0x10800, 15)->from_ns, 10u);
  EXPECT_EQ(map.placement_at(kPid, 0x50800, 35)->from_ns, 30u);
  // Without an unmap record the first placement stays open (module_map.h).
  EXPECT_EQ(map.placements(kPid)[0].to_ns, Placement::kOpen);
}

TEST(ModuleMap, AnOverlappingMappingEndsWhatItCovers) {
  ModuleMap map = replay({mapping(kPid, 10, 0x10000, 0x2000, "/lib/a.so"),
                          mapping(kPid, 11, 0x12000, 0x1000, "/lib/b.so"),
                          mapping(kPid, 12, 0x13000, 0x1000, "/lib/c.so"),
                          // Covers the end of a.so and all of b.so, not c.so.
                          mapping(kPid, 20, 0x11000, 0x2000, "/lib/d.so")});
  std::span<const Placement> placements = map.placements(kPid);
  ASSERT_EQ(placements.size(), 4u);
  EXPECT_EQ(placements[0].to_ns, 20u);
  EXPECT_EQ(placements[1].to_ns, 20u);
  EXPECT_EQ(placements[2].to_ns, Placement::kOpen);
  EXPECT_EQ(file_at(map, kPid, 0x10000, 15), "/lib/a.so");
  EXPECT_EQ(file_at(map, kPid, 0x10000, 20), "none");  // the uncovered part ends too
  EXPECT_EQ(file_at(map, kPid, 0x12800, 19), "/lib/b.so");
  EXPECT_EQ(file_at(map, kPid, 0x12800, 20), "/lib/d.so");
  EXPECT_EQ(file_at(map, kPid, 0x13000, 25), "/lib/c.so");
}

TEST(ModuleMap, TheSameMappingSeenAgainIsOnePlacement) {
  Event first = mapping(kPid, 10, 0x10000, 0x1000, "/lib/a.so");
  Event again = mapping(kPid, 20, 0x10000, 0x1000, "/lib/a.so");
  Event other_offset = mapping(kPid, 30, 0x10000, 0x1000, "/lib/a.so");
  auto moved = std::make_shared<MappingInfo>(*other_offset.mapping);
  moved->file_offset = 0x2000;
  other_offset.mapping = moved;
  ModuleMap map = replay({first, again});
  ASSERT_EQ(map.placements(kPid).size(), 1u);
  EXPECT_EQ(map.placements(kPid)[0].from_ns, 10u);

  map.on_event(other_offset);  // same range, different file bytes: a new placement
  ASSERT_EQ(map.placements(kPid).size(), 2u);
  EXPECT_EQ(map.placements(kPid)[0].to_ns, 30u);
  EXPECT_EQ(map.placement_at(kPid, 0x10000, 30)->mapping->file_offset, 0x2000u);
}

TEST(ModuleMap, AForgottenProcessHasNoPlacementsAndOthersKeepTheirs) {
  ModuleMap map = replay({mapping(kPid, 10, 0x10000, 0x1000, "/lib/a.so"), lifecycle(EventType::Fork, 200, 20, kPid),
                          lifecycle(EventType::Exit, 200, 30, 0)});
  ASSERT_EQ(map.placements(200).size(), 1u);
  map.forget(200);
  EXPECT_TRUE(map.placements(200).empty());
  EXPECT_EQ(file_at(map, 200, 0x10000, 25), "none");
  EXPECT_EQ(file_at(map, kPid, 0x10000, 25), "/lib/a.so");
  // The pid used again starts afresh.
  map.on_event(lifecycle(EventType::Fork, 200, 40, kPid));
  EXPECT_EQ(file_at(map, 200, 0x10000, 45), "/lib/a.so");
}

TEST(ModuleMap, AForkedChildInheritsTheLivePlacementsAtTheFork) {
  ModuleMap map = replay({mapping(kPid, 10, 0x10000, 0x1000, "/lib/ended.so"),
                          mapping(kPid, 11, 0x10000, 0x1000, "/lib/a.so"),  // ends ended.so
                          mapping(kPid, 12, 0x20000, 0x1000, "/lib/b.so"),
                          lifecycle(EventType::Fork, 200, 30, kPid),
                          mapping(kPid, 40, 0x30000, 0x1000, "/lib/parent-only.so"),
                          mapping(200, 50, 0x40000, 0x1000, "/lib/child-only.so"),
                          lifecycle(EventType::Fork, 300, 60, 200)});
  std::span<const Placement> child = map.placements(200);
  ASSERT_EQ(child.size(), 3u);
  EXPECT_EQ(child[0].mapping->path, "/lib/a.so");
  EXPECT_EQ(child[0].from_ns, 30u);
  EXPECT_EQ(child[1].mapping->path, "/lib/b.so");
  EXPECT_EQ(file_at(map, 200, 0x10000, 35), "/lib/a.so");
  EXPECT_EQ(file_at(map, 200, 0x10000, 25), "none");  // before the child existed
  EXPECT_EQ(file_at(map, 200, 0x30000, 45), "none");
  EXPECT_EQ(file_at(map, kPid, 0x40000, 55), "none");
  // The grandchild inherits the child's placements, inherited ones included.
  EXPECT_EQ(file_at(map, 300, 0x10000, 65), "/lib/a.so");
  EXPECT_EQ(file_at(map, 300, 0x40000, 65), "/lib/child-only.so");
  EXPECT_EQ(file_at(map, 300, 0x30000, 65), "none");
  // The copies share the parent's MappingInfo.
  EXPECT_EQ(child[0].mapping, map.placements(kPid)[1].mapping);
}

// /proc snapshots of the new image come after the Exec record.
TEST(ModuleMap, ExecEndsThePlacementsOfTheOldImage) {
  ModuleMap map = replay({mapping(kPid, 10, 0x10000, 0x1000, "/bin/old"),
                          lifecycle(EventType::Exec, kPid, 20),
                          mapping(kPid, 30, 0x20000, 0x1000, "/bin/new")});
  EXPECT_EQ(map.placements(kPid)[0].to_ns, 20u);
  EXPECT_EQ(file_at(map, kPid, 0x10000, 25), "none");
  EXPECT_EQ(file_at(map, kPid, 0x20000, 35), "/bin/new");
}

// perf reports the exec's own mappings before the Exec record, the first
// one flagged new_image.
TEST(ModuleMap, ANewImageMappingEndsTheOldImageAndItsExecKeepsTheNewOne) {
  ModuleMap map = replay({mapping(kPid, 10, 0x10000, 0x1000, "/bin/old"),
                          mapping(kPid, 20, 0x20000, 0x1000, "/bin/new", true),
                          mapping(kPid, 21, 0x30000, 0x1000, "/lib/ld.so"),
                          lifecycle(EventType::Exec, kPid, 30),
                          mapping(kPid, 40, 0x40000, 0x1000, "/lib/libc.so")});
  EXPECT_EQ(map.placements(kPid)[0].to_ns, 20u);
  EXPECT_EQ(file_at(map, kPid, 0x10000, 15), "/bin/old");
  EXPECT_EQ(file_at(map, kPid, 0x10000, 25), "none");
  EXPECT_EQ(file_at(map, kPid, 0x20000, 35), "/bin/new");
  EXPECT_EQ(file_at(map, kPid, 0x30000, 35), "/lib/ld.so");
  EXPECT_EQ(file_at(map, kPid, 0x40000, 45), "/lib/libc.so");

  // The flag served that exec only: a later Exec without one ends everything.
  map.on_event(lifecycle(EventType::Exec, kPid, 50));
  EXPECT_EQ(file_at(map, kPid, 0x20000, 55), "none");
  EXPECT_EQ(file_at(map, kPid, 0x20000, 45), "/bin/new");
}

TEST(ModuleMap, ExitEndsPlacementsAndAReusedPidStartsFresh) {
  ModuleMap map = replay({mapping(kPid, 5, 0x90000, 0x1000, "/bin/parent"),
                          mapping(7, 10, 0x10000, 0x1000, "/lib/a.so"),
                          lifecycle(EventType::Exit, 7, 20),
                          lifecycle(EventType::Fork, 7, 30, kPid)});
  EXPECT_EQ(file_at(map, 7, 0x10000, 15), "/lib/a.so");
  EXPECT_EQ(file_at(map, 7, 0x10000, 25), "none");
  EXPECT_EQ(file_at(map, 7, 0x10000, 35), "none");
  EXPECT_EQ(file_at(map, 7, 0x90000, 35), "/bin/parent");
  EXPECT_EQ(file_at(map, 7, 0x90000, 25), "none");
}

TEST(ModuleMap, EmptyOrOverflowingRangesPlaceNothing) {
  ModuleMap map = replay({mapping(kPid, 10, 0x10000, 0, "/lib/empty.so"),
                          mapping(kPid, 11, UINT64_MAX - 0xfff, 0x2000, "/lib/past-the-end.so")});
  EXPECT_TRUE(map.placements(kPid).empty());
}

// Queries at the latest time use the live set; older ones scan the history.
// Each answer given while replaying must still be given after the replay.
TEST(ModuleMap, AnswersDoNotChangeWhenLaterEventsArrive) {
  std::mt19937_64 rng(17);
  ModuleMap map;
  struct Asked {
    int32_t pid;
    uint64_t address, timestamp;
    bool found;
    uint64_t from_ns, start;  // of the placement found
  };
  std::vector<Asked> asked;
  uint64_t now = 1000;
  for (int step = 0; step < 3000; ++step) {
    now += 1 + rng() % 3;
    auto pid = static_cast<int32_t>(1 + rng() % 4);
    switch (rng() % 10) {
      case 0: map.on_event(lifecycle(EventType::Fork, pid, now, static_cast<int32_t>(1 + rng() % 4))); break;
      case 1: map.on_event(lifecycle(EventType::Exec, pid, now)); break;
      case 2: map.on_event(lifecycle(EventType::Exit, pid, now)); break;
      default: {
        uint64_t start = (rng() % 64) * 0x1000;
        uint64_t len = (1 + rng() % 4) * 0x1000;
        map.on_event(mapping(pid, now, start, len, "/lib/" + std::to_string(step), rng() % 20 == 0));
      }
    }
    for (int q = 0; q < 3; ++q) {
      auto query_pid = static_cast<int32_t>(1 + rng() % 4);
      uint64_t address = rng() % (68 * 0x1000);
      const Placement* answer = map.placement_at(query_pid, address, now);
      asked.push_back({query_pid, address, now, answer != nullptr, answer ? answer->from_ns : 0,
                       answer ? answer->start : 0});
    }
  }
  // Every process exits: no live placement is left to answer old questions.
  for (int32_t pid = 1; pid <= 4; ++pid) map.on_event(lifecycle(EventType::Exit, pid, ++now));
  size_t answered = 0;
  for (const Asked& a : asked) {
    const Placement* later = map.placement_at(a.pid, a.address, a.timestamp);
    ASSERT_EQ(later != nullptr, a.found) << "pid " << a.pid << " at " << a.timestamp;
    if (!later) continue;
    ++answered;
    EXPECT_EQ(later->from_ns, a.from_ns);
    EXPECT_EQ(later->start, a.start);
  }
  EXPECT_GT(answered, asked.size() / 20);  // the test exercises real answers
}

}  // namespace
}  // namespace memtrack
