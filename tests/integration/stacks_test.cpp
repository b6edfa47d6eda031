// End-to-end tests of stack capture (`memtrack record --stacks`): the kernel
// walks each allocation's copied stack with unwind rules learned from CFI and
// emits one definition per distinct return-address chain. fx_stacks (-O2,
// no frame pointers) allocates from distinct call paths and prints, as
// ground truth, the return addresses glibc's backtrace() sees.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include "analyze/module_map.h"
#include "recording.h"
#include "wire/events.h"

namespace memtrack::testing {
namespace {

class Stacks : public ::testing::Test {
 protected:
  void SetUp() override { MEMTRACK_REQUIRE_BPF_PRIVILEGES(); }
  TempDir dir_;
};

struct PathTruth {
  uint64_t size = 0;
  std::vector<uint64_t> backtrace;  // from the leaf, outermost last
};

// "info <pid> path <tid>:<path>:<size> <ra>..." lines of the main thread.
std::vector<PathTruth> main_thread_paths(const std::string& out, int* pid) {
  std::vector<PathTruth> paths;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::string tag, key, where;
    f >> tag >> *pid >> key >> where;
    if (tag != "info" || key != "path" || where.find('-') != std::string::npos) continue;
    PathTruth truth;
    truth.size = std::stoull(where.substr(where.rfind(':') + 1));
    for (std::string ra; f >> ra;) truth.backtrace.push_back(std::stoull(ra, nullptr, 16));
    paths.push_back(truth);
  }
  return paths;
}

std::map<uint64_t, std::shared_ptr<const StackDefinition>> definitions(const std::vector<Event>& events) {
  std::map<uint64_t, std::shared_ptr<const StackDefinition>> defs;
  for (const auto& e : events)
    if (e.type == EventType::Stack && e.stack) defs[e.stack->hash] = e.stack;
  return defs;
}

Recorded record_stacks(const TempDir& dir, const std::vector<std::string>& fixture_args,
                       const std::vector<std::string>& options, const SpawnOptions& spawn = {}) {
  std::vector<std::string> command = {FX_STACKS};
  command.insert(command.end(), fixture_args.begin(), fixture_args.end());
  Recorded r = record_command(dir, command, std::chrono::seconds(120), spawn, options);
  EXPECT_EQ(r.run.exit_code(), 0) << r.run.describe();
  EXPECT_TRUE(clean_read(r.rec));
  EXPECT_TRUE(no_losses(r.rec));
  return r;
}

// Every allocation of the window carries a stack hash that resolves to a
// definition recorded before it.
::testing::AssertionResult every_allocation_resolves(const std::vector<Event>& events, int pid) {
  std::set<uint64_t> defined;
  size_t allocations = 0;
  for (const auto& e : events) {
    if (e.type == EventType::Stack && e.stack) defined.insert(e.stack->hash);
    if (e.pid != pid || !is_allocation(e.type)) continue;
    ++allocations;
    if (e.stack_hash == 0) return ::testing::AssertionFailure() << "an allocation without stack: " << describe(e);
    if (!defined.count(e.stack_hash))
      return ::testing::AssertionFailure() << "stack hash without an earlier definition: " << describe(e);
  }
  if (allocations == 0) return ::testing::AssertionFailure() << "no allocation of pid " << pid;
  return ::testing::AssertionSuccess();
}

// Threads meeting a path neither has defined at the same moment: the one
// that finds another thread writing the definition must not record its
// allocation before that definition (it did when the other thread had
// claimed the path but not yet stamped and written its definition).
TEST_F(Stacks, ThreadsMeetingANewPathTogetherAllocateAfterItsDefinition) {
  constexpr int kSteps = 800;
  Recorded r = record_stacks(dir_, {"lockstep", std::to_string(kSteps), "2"}, {"--stacks"});
  ASSERT_FALSE(HasFailure());
  int pid = 0;
  ASSERT_EQ(std::sscanf(r.run.out.c_str(), "lockstep %d", &pid), 1) << r.run.describe();
  EXPECT_TRUE(every_allocation_resolves(r.rec.events, pid));
  size_t allocations = 0;
  for (const auto& e : r.rec.events) allocations += e.pid == pid && e.type == EventType::Malloc && e.size == 2000;
  EXPECT_EQ(allocations, size_t(2 * kSteps));
}

TEST_F(Stacks, DistinctPathsGetDistinctDefinitionsThatMatchBacktrace) {
  constexpr int kPaths = 5, kRounds = 400;
  // Rules derived and stored while the program runs (an empty cache): a walk
  // may miss in a file still being prepared, and the file's rules must still
  // reach the kernel (they did not: every later walk through libc missed).
  Recorded r = record_stacks(dir_, {std::to_string(kPaths), std::to_string(kRounds), "6", "2"}, {"--stacks"},
                             {"", {{"XDG_CACHE_HOME", dir_.file("cache")}}});
  ASSERT_FALSE(HasFailure());
  int pid = 0;
  std::vector<PathTruth> truths = main_thread_paths(r.run.out, &pid);
  ASSERT_EQ(truths.size(), size_t(kPaths)) << r.run.describe();
  EXPECT_TRUE(every_allocation_resolves(r.rec.events, pid));

  auto defs = definitions(r.rec.events);
  std::vector<Event> window;
  ASSERT_TRUE(marker_window(r.rec.events, pid, &window));
  // Per allocation size (one size per path and thread), the definitions of
  // the last half of the rounds: after warm-up, one complete chain each.
  std::map<uint64_t, std::vector<const Event*>> by_size;
  for (const auto& e : window)
    if (e.type == EventType::Malloc) by_size[e.size].push_back(&e);
  ASSERT_EQ(by_size.size(), size_t(kPaths * 3)) << "5 paths on the main thread and 2 threads";
  std::set<uint64_t> hashes_after_warmup;
  for (const auto& [size, allocations] : by_size) {
    ASSERT_EQ(allocations.size(), size_t(kRounds)) << "size " << size;
    std::set<uint64_t> late;
    for (size_t i = allocations.size() / 2; i < allocations.size(); ++i) late.insert(allocations[i]->stack_hash);
    EXPECT_EQ(late.size(), 1u) << "size " << size << ": one definition per path after warm-up";
    const StackDefinition& def = *defs.at(*late.begin());
    EXPECT_EQ(def.end, StackEnd::Complete) << "size " << size;
    EXPECT_TRUE(def.bytes.empty()) << "a complete walk keeps no raw copy";
    hashes_after_warmup.insert(late.begin(), late.end());
  }
  // Main-thread paths differ from each other; the two threads run the same
  // code, so they share their chains: 5 + 5 distinct paths.
  EXPECT_EQ(hashes_after_warmup.size(), size_t(2 * kPaths));
  size_t window_definitions = 0;
  for (const auto& e : window) window_definitions += e.type == EventType::Stack;
  EXPECT_LE(window_definitions, size_t(1.5 * 2 * kPaths) + 20) << "dedup: warm-up misses plus one per path";

  // Every return address lies in a file the process had mapped at that time
  // (Mapping records): none is the uretprobe trampoline of an allocator
  // probed while another one runs (operator new -> malloc), nor garbage.
  ModuleMap modules;
  for (const auto& e : r.rec.events) {
    modules.on_event(e);
    if (e.type != EventType::Stack || e.pid != pid) continue;
    for (uint64_t ra : e.stack->chain)
      EXPECT_NE(modules.placement_at(pid, ra - 1, e.timestamp), nullptr) << std::hex << "0x" << ra;
  }

  // The kernel's chain is the path glibc's unwinder sees: chain[0] returns
  // into the leaf after malloc, backtrace()[0] after backtrace(); the
  // callers above match frame for frame, up to _start.
  for (const auto& truth : truths) {
    SCOPED_TRACE("size " + std::to_string(truth.size));
    const auto& allocations = by_size.at(truth.size);
    const StackDefinition& def = *defs.at(allocations.back()->stack_hash);
    ASSERT_GE(truth.backtrace.size(), 8u);
    ASSERT_EQ(def.chain.size(), truth.backtrace.size());
    EXPECT_TRUE(std::equal(def.chain.begin() + 1, def.chain.end(), truth.backtrace.begin() + 1));
  }
}

TEST_F(Stacks, CaptureOffRecordsNoStacks) {
  Recorded r = record_stacks(dir_, {"3", "50", "4", "1"}, {"--no-stacks"});
  ASSERT_FALSE(HasFailure());
  size_t allocations = 0;
  for (const auto& e : r.rec.events) {
    EXPECT_NE(e.type, EventType::Stack);
    if (is_allocation(e.type)) {
      ++allocations;
      EXPECT_EQ(e.stack_hash, 0u) << describe(e);
    }
  }
  EXPECT_GT(allocations, 0u);
  ASSERT_TRUE(r.rec.read.trailer);
  EXPECT_EQ(r.rec.read.trailer->counters.count("stacks_captured"), 0u) << "no stack counters without capture";
}

// 150 frames of recursion, the largest budget: the verifier accepts the
// programs at their limits, and the walk completes.
TEST_F(Stacks, DeepStacksAtTheLargestBudget) {
  Recorded r = record_stacks(dir_, {"2", "50", "150", "0"}, {"--stacks", "--stack-budget", "32768"});
  ASSERT_FALSE(HasFailure());
  int pid = 0;
  std::vector<PathTruth> truths = main_thread_paths(r.run.out, &pid);
  ASSERT_EQ(truths.size(), 2u);
  auto defs = definitions(r.rec.events);
  std::vector<Event> window;
  ASSERT_TRUE(marker_window(r.rec.events, pid, &window));
  for (const auto& truth : truths) {
    const Event* last = nullptr;
    for (const auto& e : window)
      if (e.type == EventType::Malloc && e.size == truth.size) last = &e;
    ASSERT_NE(last, nullptr);
    const StackDefinition& def = *defs.at(last->stack_hash);
    EXPECT_EQ(def.end, StackEnd::Complete);
    EXPECT_GE(def.chain.size(), 150u);
    ASSERT_EQ(def.chain.size(), truth.backtrace.size());
    EXPECT_TRUE(std::equal(def.chain.begin() + 1, def.chain.end(), truth.backtrace.begin() + 1));
  }
}

// Whether the run records with --uprobes: the kernel walks, not the interposer.
bool kernel_walks() {
  const auto& options = run_record_options();
  return std::find(options.begin(), options.end(), "--uprobes") != options.end();
}

// The last definition of the window's 1000-byte allocations of fx_deep_frames.
const StackDefinition* deep_definition(const Recorded& r, int pid) {
  auto defs = definitions(r.rec.events);
  std::vector<Event> window;
  if (!marker_window(r.rec.events, pid, &window)) return nullptr;
  const Event* last = nullptr;
  for (const auto& e : window)
    if (e.type == EventType::Malloc && e.size == 1000) last = &e;
  if (!last || !defs.count(last->stack_hash)) return nullptr;
  return defs.at(last->stack_hash).get();
}

// 200 frames of 1 KiB each: the path runs far past the default copy, and the
// walk follows it on the live stack to _start.
TEST_F(Stacks, DeepLargeFramesCompleteAtTheDefaultBudget) {
  Recorded r = record_command(dir_, {FX_DEEP_FRAMES, "200", "1024", "20"}, std::chrono::seconds(120), {},
                              {"--stacks"});
  ASSERT_EQ(r.run.exit_code(), 0) << r.run.describe();
  EXPECT_TRUE(clean_read(r.rec));
  EXPECT_TRUE(no_losses(r.rec));
  int pid = 0;
  std::vector<PathTruth> truths = main_thread_paths(r.run.out, &pid);
  ASSERT_EQ(truths.size(), 1u) << r.run.describe();
  EXPECT_TRUE(every_allocation_resolves(r.rec.events, pid));
  const StackDefinition* def = deep_definition(r, pid);
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(def->end, StackEnd::Complete);
  EXPECT_TRUE(def->bytes.empty()) << "a complete walk keeps no raw copy";
  const auto& truth = truths[0].backtrace;
  ASSERT_GE(truth.size(), 200u);
  ASSERT_EQ(def->chain.size(), truth.size());
  EXPECT_TRUE(std::equal(def->chain.begin() + 1, def->chain.end(), truth.begin() + 1));
  ASSERT_TRUE(r.rec.read.trailer);
  if (kernel_walks())
    EXPECT_GT(r.rec.read.trailer->counters.at("stack_live_reads"), 0u) << "the kernel walked inside its copy only";
  else
    EXPECT_GT(r.rec.read.trailer->counters.at("interposer_walks_complete"), 0u) << "not walked by the interposer";
}

// A path longer than the walk's frame limit ends "frame-limit", with the
// innermost MT_MAX_FRAMES frames, and the walker that cut it counts it so.
TEST_F(Stacks, PathsBeyondTheFrameLimitEndFrameLimit) {
  Recorded r = record_command(dir_, {FX_DEEP_FRAMES, "300", "64", "3"}, std::chrono::seconds(120), {},
                              {"--stacks"});
  ASSERT_EQ(r.run.exit_code(), 0) << r.run.describe();
  int pid = 0;
  std::vector<PathTruth> truths = main_thread_paths(r.run.out, &pid);
  ASSERT_EQ(truths.size(), 1u) << r.run.describe();
  const StackDefinition* def = deep_definition(r, pid);
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(def->end, StackEnd::FrameLimit);
  const auto& truth = truths[0].backtrace;
  ASSERT_GT(truth.size(), size_t(MT_MAX_FRAMES));
  ASSERT_EQ(def->chain.size(), size_t(MT_MAX_FRAMES));
  EXPECT_TRUE(std::equal(def->chain.begin() + 1, def->chain.end(), truth.begin() + 1));
  ASSERT_TRUE(r.rec.read.trailer);
  const char* walker_counter = kernel_walks() ? "stack_walks_frame_limit" : "interposer_walks_frame_limit";
  const auto& counters = r.rec.read.trailer->counters;
  ASSERT_TRUE(counters.count(walker_counter)) << walker_counter;
  EXPECT_GE(counters.at(walker_counter), 1u) << walker_counter;
}

// A secret in the environment and argv (behind the 512 bytes an Exec record
// keeps of argv) is in no artifact, whatever the mode: stack copies and live
// reads stop below the argument and environment area at the stack's top.
TEST_F(Stacks, NoSecretOfTheEnvironmentOrArgvInAnyArtifact) {
  const std::string secret = "mt-secret-" + std::to_string(getpid()) + "-c0ffee5eed";
  const std::vector<std::vector<std::string>> modes = {
      {},
      {"--stacks"},
      {"--stacks", "--stack-budget", "32768"},
      {"--stacks", "--stack-mode", "raw"},
      {"--stacks", "--stack-mode", "raw", "--stack-budget", "32768"},
      {"--stacks", "--embed-modules"},
  };
  for (const auto& mode : modes) {
    std::string name;
    for (const auto& option : mode) name += option + " ";
    SCOPED_TRACE("record " + name);
    SpawnOptions env;
    env.env = {{"FX_SECRET", secret}};
    Recorded r = record_command(dir_, {FX_DEEP_FRAMES, "secret"}, std::chrono::seconds(120), env, mode);
    ASSERT_EQ(r.run.exit_code(), 0) << r.run.describe();
    EXPECT_TRUE(clean_read(r.rec));
    std::ifstream file(dir_.file("a.zst"), std::ios::binary);
    std::string raw((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(raw.empty());
    EXPECT_EQ(raw.find(secret), std::string::npos) << "in the file's bytes";
    RunResult unpacked = run_process({ZSTD_BIN, "-dc", dir_.file("a.zst")}, std::chrono::seconds(60));
    ASSERT_EQ(unpacked.exit_code(), 0) << unpacked.describe();
    ASSERT_FALSE(unpacked.out.empty());
    EXPECT_EQ(unpacked.out.find(secret), std::string::npos) << "in the decompressed records";
    // The test can fail: raw copies made right below main ran up to the
    // stack's limit (not to the budget), where the argument area begins.
    if (mode.size() >= 3 && mode[2] == "raw") {
      size_t to_the_limit = 0;
      for (const auto& [hash, def] : definitions(r.rec.events))
        if (!def->bytes.empty() && !def->truncated && def->bytes.size() < 8192) ++to_the_limit;
      EXPECT_GT(to_the_limit, 0u) << "no copy reached the top of the main thread's stack";
    }
  }
}

// The seed's method, kept for comparison: raw bytes, hashed, every one a
// definition with its registers.
TEST_F(Stacks, RawModeKeepsTheBytes) {
  Recorded r = record_stacks(dir_, {"2", "20", "2", "0"}, {"--stacks", "--stack-mode", "raw"});
  ASSERT_FALSE(HasFailure());
  int pid = 0;
  main_thread_paths(r.run.out, &pid);
  EXPECT_TRUE(every_allocation_resolves(r.rec.events, pid));
  for (const auto& [hash, def] : definitions(r.rec.events)) {
    EXPECT_EQ(def->end, StackEnd::NotWalked);
    EXPECT_TRUE(def->chain.empty());
    EXPECT_GE(def->bytes.size(), 8u);
    EXPECT_EQ(def->regs.size(), 17u);
    EXPECT_NE(def->sp, 0u);
  }
}

// A stack ring far too small for the definitions (128 KiB against raw copies
// of 8 KiB, a definition for nearly every allocation of two threads): the
// kernel pauses the producing process at half full, as it does for the event
// ring, instead of dropping definitions (1,800-2,200 of 3,210 were lost
// before), and every allocation keeps its path. The half left over is for
// the definitions the process's threads still have in flight.
TEST_F(Stacks, AFullStackRingPausesTheProducerAndLosesNoDefinition) {
  Recorded r = record_stacks(dir_, {"8", "200", "4", "1"}, {"--stack-mode", "raw", "--stack-ring-mib", "0.125"});
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(r.rec.read.trailer);
  const auto& counters = r.rec.read.trailer->counters;
  EXPECT_GT(counters.at("backpressure_pauses"), 0u) << "the stack ring never filled: nothing tested";
  EXPECT_GT(counters.at("stack_definitions"), 1000u);
  int pid = 0;
  main_thread_paths(r.run.out, &pid);
  EXPECT_TRUE(every_allocation_resolves(r.rec.events, pid));
}

// A forked child's allocations carry stacks too (its module table is made
// while it is stopped at birth).
TEST_F(Stacks, ForkedChildAllocationsCarryStacks) {
  Recorded r = record_command(dir_, {FX_LIBC, "fork"}, std::chrono::seconds(60), {}, {"--stacks"});
  ASSERT_EQ(r.run.exit_code(), 0) << r.run.describe();
  EXPECT_TRUE(no_losses(r.rec));
  int child = 0;
  for (const auto& e : r.rec.events)
    if (e.type == EventType::Fork) child = e.pid;
  ASSERT_NE(child, 0);
  EXPECT_TRUE(every_allocation_resolves(r.rec.events, child));
}

}  // namespace
}  // namespace memtrack::testing
