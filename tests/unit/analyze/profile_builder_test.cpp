// ProfileBuilder on synthetic traces whose call paths point into this test
// binary (mapped as /proc/self/maps shows): resolution, symbolization,
// merging, outcomes, filters and suppressions.
#include <sys/sysmacros.h>

#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <string>

#include "analyze/profile_builder.h"
#include "util/proc_maps.h"

namespace memtrack {
namespace {

constexpr uint64_t kStart = 1'000'000;
constexpr int32_t kPid = 100;

// The return address of a call made from a known function.
extern "C" __attribute__((noinline)) uint64_t pb_leaf_caller() {
  uint64_t ra = reinterpret_cast<uint64_t>(__builtin_return_address(0));
  asm volatile("" ::: "memory");
  return ra;
}
extern "C" __attribute__((noinline)) uint64_t pb_outer_function() {
  uint64_t ra = pb_leaf_caller();
  asm volatile("" ::: "memory");
  return ra;
}

// This executable's text mapping as a Mapping event.
Event own_text_mapping() {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  exe[n > 0 ? n : 0] = 0;
  for (const MapEntry& m : read_maps_file("/proc/self/maps")) {
    if (m.perms != "r-xp" || m.path != exe) continue;
    auto info = std::make_shared<MappingInfo>();
    info->len = m.end - m.start;
    info->file_offset = m.offset;
    info->dev = m.kernel_dev();
    info->ino = m.ino;
    info->prot = 5;
    info->path = m.path;
    Event e;
    e.type = EventType::Mapping;
    e.pid = e.tid = kPid;
    e.timestamp = kStart + 1;
    e.addr = m.start;
    e.mapping = info;
    return e;
  }
  throw std::runtime_error("no r-xp mapping of the test executable");
}

Event stack_event(uint64_t hash, std::vector<uint64_t> chain, StackEnd end = StackEnd::Complete) {
  auto definition = std::make_shared<StackDefinition>();
  definition->hash = hash;
  definition->chain = std::move(chain);
  definition->end = end;
  Event e;
  e.type = EventType::Stack;
  e.pid = e.tid = kPid;
  e.timestamp = kStart + 2;
  e.stack = definition;
  return e;
}

Event allocation(uint64_t addr, uint64_t size, uint64_t hash, uint64_t at) {
  Event e;
  e.type = EventType::Malloc;
  e.pid = e.tid = kPid;
  e.timestamp = kStart + at;
  e.addr = addr;
  e.size = size;
  e.stack_hash = hash;
  return e;
}

Event release(uint64_t addr, uint64_t at) {
  Event e;
  e.type = EventType::Free;
  e.pid = e.tid = kPid;
  e.timestamp = kStart + at;
  e.addr = addr;
  return e;
}

// The process exits: its blocks still live are leaks.
Event process_exit(uint64_t at) {
  Event e;
  e.type = EventType::Exit;
  e.pid = e.tid = kPid;
  e.timestamp = kStart + at;
  return e;
}

Profile build(const std::vector<Event>& events, ProfileOptions options = {}) {
  ProfileBuilder builder(std::move(options));
  HeapReplay heap({}, kStart);
  for (const Event& e : events) heap.on_event(e, builder.on_event(e));
  heap.finish();
  return builder.build(heap);
}

const ProfileSite* site_with_bytes(const Profile& profile, uint64_t bytes) {
  for (const ProfileSite& site : profile.sites)
    if (site.costs.allocated_bytes == bytes) return &site;
  return nullptr;
}

std::vector<std::string> functions(const Profile& profile, const ProfileSite& site) {
  std::vector<std::string> names;
  for (uint32_t index : site.locations)
    for (const SourceFrame& frame : profile.locations[index].frames) names.push_back(frame.function);
  return names;
}

class ProfileBuilding : public ::testing::Test {
 protected:
  void SetUp() override {
    leaf_ra = pb_leaf_caller();    // returns into this function
    outer_ra = pb_outer_function();  // returns into pb_outer_function... of its caller: SetUp
    inner_ra = 0;
    // pb_outer_function's call of pb_leaf_caller returns into pb_outer_function.
    inner_ra = pb_outer_function_return_address();
  }
  static uint64_t pb_outer_function_return_address() { return pb_outer_function(); }
  uint64_t leaf_ra = 0, outer_ra = 0, inner_ra = 0;
};

TEST_F(ProfileBuilding, ResolvesSymbolizesAndMergesEqualPaths) {
  // pb_outer_function() returned the address inside itself where pb_leaf_caller returns.
  uint64_t in_outer = pb_outer_function();
  std::vector<Event> events{own_text_mapping(),
                            stack_event(1, {in_outer, leaf_ra}),
                            stack_event(2, {in_outer, leaf_ra}),  // same path, another hash
                            allocation(0x1000, 10, 1, 3),
                            allocation(0x2000, 20, 2, 4),
                            allocation(0x3000, 5, 0, 5),     // no stack
                            allocation(0x4000, 7, 99, 6),    // its Stack record is missing
                            release(0x1000, 7),
                            process_exit(8)};
  Profile profile = build(events);
  const ProfileSite* merged = site_with_bytes(profile, 30);
  ASSERT_NE(merged, nullptr) << "hashes 1 and 2 resolve to the same locations: one site";
  EXPECT_EQ(merged->costs.allocations, 2u);
  EXPECT_EQ(merged->costs.leaked_bytes, 20u);
  EXPECT_EQ(merged->outcome, StackOutcome::Complete);
  std::vector<std::string> names = functions(profile, *merged);
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names.front(), "pb_outer_function");
  EXPECT_NE(names.back().find("ProfileBuilding"), std::string::npos) << names.back();
  ASSERT_EQ(profile.modules.size(), 1u);
  EXPECT_TRUE(profile.modules[0].symbolized);
  EXPECT_EQ(site_with_bytes(profile, 5)->outcome, StackOutcome::NoStack);
  EXPECT_EQ(site_with_bytes(profile, 7)->outcome, StackOutcome::Undefined);
  EXPECT_EQ(profile.definitions_by_outcome[static_cast<int>(StackOutcome::Complete)], 2u);
  EXPECT_EQ(profile.allocations_by_outcome[static_cast<int>(StackOutcome::Complete)], 2u);
  EXPECT_EQ(profile.totals.allocated_bytes, 42u);
  EXPECT_EQ(profile.totals.peak_bytes, 42u);
}

// split_by_thread: one site per path and thread, each with its pid and tid;
// without it the threads' costs are one site.
TEST_F(ProfileBuilding, SplitByThreadKeepsThreadsApart) {
  uint64_t in_outer = pb_outer_function();
  auto on_thread = [](Event e, int32_t tid) {
    e.tid = tid;
    return e;
  };
  std::vector<Event> events{own_text_mapping(), stack_event(1, {in_outer, leaf_ra}),
                            on_thread(allocation(0x1000, 10, 1, 3), kPid),
                            on_thread(allocation(0x2000, 20, 1, 4), kPid + 1),
                            on_thread(allocation(0x3000, 40, 1, 5), kPid + 1),
                            on_thread(allocation(0x4000, 80, 0, 6), kPid + 1)};  // no stack
  Profile merged = build(events);
  ASSERT_NE(site_with_bytes(merged, 70), nullptr) << "one site for both threads";
  EXPECT_EQ(site_with_bytes(merged, 70)->tid, 0);

  ProfileOptions split;
  split.split_by_thread = true;
  Profile profile = build(events, split);
  ASSERT_EQ(profile.sites.size(), 3u);
  const ProfileSite* main_thread = site_with_bytes(profile, 10);
  const ProfileSite* second_thread = site_with_bytes(profile, 60);
  const ProfileSite* no_stack = site_with_bytes(profile, 80);
  ASSERT_TRUE(main_thread && second_thread && no_stack);
  EXPECT_EQ(main_thread->pid, kPid);
  EXPECT_EQ(main_thread->tid, kPid);
  EXPECT_EQ(second_thread->pid, kPid);
  EXPECT_EQ(second_thread->tid, kPid + 1);
  EXPECT_EQ(second_thread->costs.allocations, 2u);
  EXPECT_EQ(main_thread->locations, second_thread->locations);
  EXPECT_EQ(no_stack->outcome, StackOutcome::NoStack);
  EXPECT_EQ(no_stack->tid, kPid + 1);
  EXPECT_EQ(profile.totals, merged.totals);
}

// Split by thread, a hash whose Stack record comes after its allocations
// (or never) is still one site per thread, resolved to the late path.
TEST_F(ProfileBuilding, SplitByThreadResolvesLateStacksPerThread) {
  uint64_t in_outer = pb_outer_function();
  auto on_thread = [](Event e, int32_t tid) {
    e.tid = tid;
    return e;
  };
  std::vector<Event> events{own_text_mapping(),
                            on_thread(allocation(0x1000, 10, 7, 3), kPid),
                            on_thread(allocation(0x2000, 20, 7, 4), kPid + 1),
                            on_thread(allocation(0x3000, 40, 8, 5), kPid + 1),  // never defined
                            stack_event(7, {in_outer, leaf_ra})};
  events.back().timestamp = kStart + 6;
  ProfileOptions split;
  split.split_by_thread = true;
  Profile profile = build(events, split);
  ASSERT_EQ(profile.sites.size(), 3u);
  const ProfileSite* first = site_with_bytes(profile, 10);
  const ProfileSite* second = site_with_bytes(profile, 20);
  const ProfileSite* undefined = site_with_bytes(profile, 40);
  ASSERT_TRUE(first && second && undefined);
  EXPECT_EQ(first->outcome, StackOutcome::Complete);
  EXPECT_EQ(first->locations, second->locations);
  EXPECT_FALSE(first->locations.empty());
  EXPECT_EQ(first->tid, kPid);
  EXPECT_EQ(second->tid, kPid + 1);
  EXPECT_EQ(undefined->outcome, StackOutcome::Undefined);
  EXPECT_EQ(undefined->pid, kPid);
  EXPECT_EQ(undefined->tid, kPid + 1);
}

TEST_F(ProfileBuilding, AddressesOutsideEveryMappingKeepTheirAddress) {
  std::vector<Event> events{stack_event(1, {0xdead0, 0xbeef0}, StackEnd::NoModule), allocation(0x1000, 10, 1, 3)};
  Profile profile = build(events);
  ASSERT_EQ(profile.sites.size(), 1u);
  EXPECT_EQ(profile.sites[0].outcome, StackOutcome::NoModule);
  ASSERT_EQ(profile.sites[0].locations.size(), 2u);
  const ProfileLocation& first = profile.locations[profile.sites[0].locations[0]];
  EXPECT_EQ(first.address, 0xdead0u);
  EXPECT_EQ(first.module, -1);
  EXPECT_TRUE(first.frames.empty());
}

// A return address resolved once is not taken as known after its process
// mapped a file over it: the second path names the new file.
TEST_F(ProfileBuilding, AnAddressMappedLaterNamesTheFileMappedThere) {
  constexpr uint64_t kAddress = 0x7f0000001230;
  Event later_stack = stack_event(2, {kAddress}, StackEnd::Complete);
  later_stack.timestamp = kStart + 5;
  Event library;
  library.type = EventType::Mapping;
  library.pid = library.tid = kPid;
  library.timestamp = kStart + 4;
  library.addr = kAddress & ~uint64_t{0xfff};
  auto info = std::make_shared<MappingInfo>();
  info->len = 0x10000;
  info->prot = 5;
  info->path = "/nonexistent/libmapped_later.so";
  library.mapping = info;
  std::vector<Event> events{own_text_mapping(),
                            stack_event(1, {kAddress}, StackEnd::NoModule),
                            allocation(0x1000, 10, 1, 3),
                            library,
                            later_stack,
                            allocation(0x2000, 20, 2, 6)};
  Profile profile = build(events);
  const ProfileSite* before = site_with_bytes(profile, 10);
  const ProfileSite* after = site_with_bytes(profile, 20);
  ASSERT_NE(before, nullptr);
  ASSERT_NE(after, nullptr);
  ASSERT_EQ(before->locations.size(), 1u);
  ASSERT_EQ(after->locations.size(), 1u);
  EXPECT_EQ(profile.locations[before->locations[0]].module, -1) << "nothing was mapped there yet";
  const int32_t module = profile.locations[after->locations[0]].module;
  ASSERT_GE(module, 0) << "the file mapped there since";
  EXPECT_EQ(profile.modules[static_cast<size_t>(module)].path, "/nonexistent/libmapped_later.so");
}

// A walk cut at the frame limit says so, not that its copy was too short.
TEST_F(ProfileBuilding, AWalkAtTheFrameLimitEndsFrameLimit) {
  std::vector<Event> events{stack_event(1, {0xdead0, 0xbeef0}, StackEnd::FrameLimit), allocation(0x1000, 10, 1, 3)};
  Profile profile = build(events);
  ASSERT_EQ(profile.sites.size(), 1u);
  EXPECT_EQ(profile.sites[0].outcome, StackOutcome::FrameLimit);
  EXPECT_EQ(profile.allocations_by_outcome[static_cast<int>(StackOutcome::FrameLimit)], 1u);
}

TEST_F(ProfileBuilding, FunctionFilterAndSuppressions) {
  uint64_t in_outer = pb_outer_function();
  std::vector<Event> base{own_text_mapping(), stack_event(1, {in_outer, leaf_ra}), stack_event(2, {leaf_ra}),
                          allocation(0x1000, 10, 1, 3), allocation(0x2000, 20, 2, 4), process_exit(5)};
  ProfileOptions only_outer;
  only_outer.function = "pb_outer";
  Profile filtered = build(base, std::move(only_outer));
  ASSERT_EQ(filtered.sites.size(), 1u);
  EXPECT_EQ(filtered.totals.allocated_bytes, 10u);

  ProfileOptions suppressing;
  suppressing.suppressions = Suppressions::from_text("leak:^pb_outer_function$\n", "test");
  Profile suppressed = build(base, std::move(suppressing));
  EXPECT_EQ(suppressed.suppressed_leaked_bytes, 10u);
  EXPECT_EQ(suppressed.suppressed_leaked_allocations, 1u);
  EXPECT_EQ(suppressed.totals.leaked_bytes, 20u);
  EXPECT_EQ(site_with_bytes(suppressed, 10)->costs.leaked_bytes, 0u);
}

TEST_F(ProfileBuilding, AMissingFileIsAWarningNotAFailure) {
  Event mapping = own_text_mapping();
  auto info = std::make_shared<MappingInfo>(*mapping.mapping);
  info->path = "/nonexistent/memtrack-test/libgone.so";
  info->build_id = {1, 2, 3, 4};
  mapping.mapping = info;
  uint64_t in_outer = pb_outer_function();
  Profile profile = build({mapping, stack_event(1, {in_outer}), allocation(0x1000, 10, 1, 3)});
  ASSERT_EQ(profile.sites.size(), 1u);
  const ProfileLocation& location = profile.locations[profile.sites[0].locations[0]];
  EXPECT_TRUE(location.frames.empty());
  EXPECT_EQ(location.module, 0);
  EXPECT_FALSE(profile.modules[0].symbolized);
  EXPECT_EQ(profile.modules[0].build_id, "01020304");
  ASSERT_FALSE(profile.warnings.empty());
  EXPECT_NE(profile.warnings[0].find("libgone.so"), std::string::npos) << profile.warnings[0];
}

// Hostile raw copies: random bytes and registers (the pc inside this
// binary, so the unwinder gets going), too few registers, an empty copy.
// Each ends with a reason; nothing crashes or loops.
TEST_F(ProfileBuilding, GarbageRawCopiesEndWithAReason) {
  Event mapping = own_text_mapping();
  std::vector<Event> events{mapping};
  uint64_t state = 12345;
  auto next = [&] { return state = state * 6364136223846793005ULL + 1442695040888963407ULL; };
  for (uint64_t hash = 1; hash <= 200; ++hash) {
    auto definition = std::make_shared<StackDefinition>();
    definition->hash = hash;
    definition->end = StackEnd::NoRule;
    definition->bytes.resize(8 * (next() % 600));
    for (uint8_t& b : definition->bytes) b = static_cast<uint8_t>(next() >> 56);
    definition->sp = next() & ~uint64_t{7};
    definition->regs.resize(hash % 10 == 0 ? 5 : 17);
    for (uint64_t& r : definition->regs) r = next();
    if (definition->regs.size() == 17) {
      definition->regs[16] = mapping.addr + next() % mapping.mapping->len;
      definition->regs[7] = definition->sp;
    }
    Event e = stack_event(hash, {});
    e.stack = definition;
    events.push_back(e);
    events.push_back(allocation(0x1000 * hash, 8, hash, 3 + hash));
  }
  Profile profile = build(events);
  uint64_t definitions = 0;
  for (uint64_t n : profile.definitions_by_outcome) definitions += n;
  EXPECT_EQ(definitions, 200u);
  EXPECT_EQ(profile.totals.allocations, 200u);
  for (const ProfileSite& site : profile.sites) EXPECT_LE(site.locations.size(), 512u);
  // Too few registers: an impossible frame, not a complete path.
  EXPECT_GE(profile.definitions_by_outcome[static_cast<int>(StackOutcome::BadCfa)], 20u);
}

// An allocation may come before its Stack record (the fallback when the
// poller's ordering was exceeded): it is resolved at the end, whatever the
// hash's bits.
TEST_F(ProfileBuilding, AStackRecordAfterItsAllocationStillResolves) {
  uint64_t in_outer = pb_outer_function();
  const uint64_t high_bit_hash = 0x8000000000000123;
  std::vector<Event> events{own_text_mapping(), allocation(0x1000, 10, high_bit_hash, 3),
                            stack_event(high_bit_hash, {in_outer, leaf_ra}), stack_event(0x123, {leaf_ra}),
                            allocation(0x2000, 20, 0x123, 5)};
  events[2].timestamp = events[3].timestamp = kStart + 4;
  Profile profile = build(events);
  const ProfileSite* late = site_with_bytes(profile, 10);
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(late->outcome, StackOutcome::Complete);
  EXPECT_EQ(late->locations.size(), 2u);
  EXPECT_EQ(site_with_bytes(profile, 20)->locations.size(), 1u) << "0x123 is another hash";
}

// The recorder orders records within a margin: a Stack record may come just
// after its process's Exit and must still find the process's files. Long
// after, the exited process's placements are gone (memory does not grow with
// the processes of a long trace).
TEST_F(ProfileBuilding, AStackRecordShortlyAfterItsProcessExitedStillResolves) {
  uint64_t in_outer = pb_outer_function();
  Event exit;
  exit.type = EventType::Exit;
  exit.pid = exit.tid = kPid;
  exit.timestamp = kStart + 10;
  // Stamped when captured, before the exit; read after it.
  Event late = stack_event(1, {in_outer});
  late.timestamp = kStart + 5;
  Event much_later = stack_event(2, {in_outer});
  much_later.timestamp = kStart + 6;
  Event elsewhere = allocation(0x9000, 1, 0, 10 + 2'000'000'000);
  elsewhere.pid = elsewhere.tid = kPid + 1;
  Profile profile = build({own_text_mapping(), allocation(0x1000, 10, 1, 3), allocation(0x2000, 20, 2, 4), exit,
                           late, elsewhere, much_later});
  ASSERT_NE(site_with_bytes(profile, 10), nullptr);
  const ProfileLocation& found = profile.locations[site_with_bytes(profile, 10)->locations.at(0)];
  EXPECT_EQ(found.module, 0);
  ASSERT_FALSE(found.frames.empty());
  EXPECT_EQ(found.frames.back().function, "pb_outer_function");
  const ProfileLocation& gone = profile.locations[site_with_bytes(profile, 20)->locations.at(0)];
  EXPECT_EQ(gone.module, -1) << "2 s after the exit the process's placements were dropped";
}

// A Module record names the Mappings with its device and inode even when it
// also carries the file's build id (docs/FORMAT.md).
TEST_F(ProfileBuilding, ModuleRecordsMatchMappingsByDeviceAndInode) {
  Event mapping = own_text_mapping();
  auto info = std::make_shared<MappingInfo>(*mapping.mapping);
  info->path = "/nonexistent/memtrack-test/app";
  mapping.mapping = info;
  uint64_t in_outer = pb_outer_function();
  uint64_t offset = in_outer - mapping.addr + info->file_offset;
  ModuleInfo module;
  module.path = info->path;
  module.dev = info->dev;
  module.ino = info->ino;
  module.build_id = {0xaa, 0xbb};
  module.load_segments.push_back({info->file_offset, info->file_offset, info->len, info->len, 5});
  module.symbols.push_back({offset - 0x10, 0x100, "embedded_name"});
  ProfileBuilder builder({});
  HeapReplay heap({}, kStart);
  for (const Event& e : {mapping, stack_event(1, {in_outer}), allocation(0x1000, 10, 1, 3)})
    heap.on_event(e, builder.on_event(e));
  builder.on_module(module);
  heap.finish();
  Profile profile = builder.build(heap);
  ASSERT_EQ(profile.sites.size(), 1u);
  const ProfileLocation& location = profile.locations[profile.sites[0].locations[0]];
  ASSERT_EQ(location.frames.size(), 1u);
  EXPECT_EQ(location.frames[0].function, "embedded_name");
}

// A walk that stopped short has a hash of its own for its one allocation:
// the builder forgets it once used (memory follows shared paths).
TEST_F(ProfileBuilding, SingleUseDefinitionsAreForgottenAfterTheirAllocation) {
  auto raw = std::make_shared<StackDefinition>();
  raw->hash = 7;
  raw->end = StackEnd::NoRule;
  raw->regs.assign(17, 0);
  raw->bytes.assign(64, 0);
  Event stack = stack_event(7, {});
  stack.stack = raw;
  Profile profile = build({stack, allocation(0x1000, 10, 7, 3), allocation(0x2000, 20, 7, 4)});
  ASSERT_NE(site_with_bytes(profile, 10), nullptr);
  EXPECT_NE(site_with_bytes(profile, 10)->outcome, StackOutcome::Undefined);
  EXPECT_EQ(site_with_bytes(profile, 20)->outcome, StackOutcome::Undefined);
}

}  // namespace
}  // namespace memtrack
