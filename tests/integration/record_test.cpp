// End-to-end tests of `memtrack record`: the fixtures (tests/fixtures) are
// run under memtrack and the artifact is compared with the ground truth each
// fixture prints (markers.h): the exact event sequence between the markers,
// addresses included. Needs root or CAP_BPF+CAP_PERFMON; otherwise every test
// is reported as skipped, loudly.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <fstream>
#include <thread>

#include "recording.h"
#include "util/proc_text.h"

namespace memtrack::testing {
namespace {

using Shape = std::vector<std::pair<EventType, uint64_t>>;
constexpr EventType kMalloc = EventType::Malloc, kCalloc = EventType::Calloc, kRealloc = EventType::Realloc,
                    kAligned = EventType::AlignedAlloc, kFree = EventType::Free;

class Record : public ::testing::Test {
 protected:
  void SetUp() override { MEMTRACK_REQUIRE_BPF_PRIVILEGES(); }
  TempDir dir_;
};

// Runs a fixture under memtrack, checks the run and the artifact, and returns
// the recording with the fixture's ground truth.
struct FixtureRun {
  Recorded recorded;
  GroundTruth gt;
};

FixtureRun run_fixture(const TempDir& dir, const std::vector<std::string>& command,
                       std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  FixtureRun f;
  f.recorded = record_command(dir, command, timeout);
  const RunResult& run = f.recorded.run;
  EXPECT_FALSE(run.timed_out) << run.describe();
  EXPECT_EQ(run.exit_code(), 0) << run.describe();
  EXPECT_TRUE(std::filesystem::exists(dir.file("a.zst"))) << "no artifact written; " << run.describe();
  EXPECT_TRUE(clean_read(f.recorded.rec));
  EXPECT_TRUE(no_losses(f.recorded.rec));
  f.gt = parse_ground_truth(run.out);
  EXPECT_TRUE(f.gt.bad_lines.empty()) << "unparsable ground truth line: " << f.gt.bad_lines.front();
  return f;
}

// The single pid that printed ground truth.
int only_pid(const GroundTruth& gt) {
  auto pids = gt.pids();
  EXPECT_EQ(pids.size(), 1u) << "expected ground truth from one process";
  return pids.empty() ? -1 : pids.front();
}

// Skips the test (a macro: GTEST_SKIP returns from the calling function)
// when an optional fixture was not built.
#define SKIP_UNLESS_BUILT(path, what)                                                                  \
  do {                                                                                                 \
    if (std::string(path).empty())                                                                     \
      GTEST_SKIP() << "*** SKIPPED: " << (what) << " is not installed, so its fixture was not built ***"; \
  } while (0)

// ------------------------------------------------------------- allocators

TEST_F(Record, LibcEveryFunctionExactSequence) {
  FixtureRun f = run_fixture(dir_, {FX_LIBC, "all"});
  ASSERT_FALSE(HasFailure());
  int pid = only_pid(f.gt);
  const auto& expected = f.gt.of(pid);
  // The fixture's ground truth itself follows the documented semantics.
  Shape spec = {{kMalloc, 100},    {kCalloc, 200},   {kRealloc, 1000}, {kRealloc, 500},  {kAligned, 256},
                {kAligned, 512},   {kAligned, 1024}, {kAligned, 4000}, {kAligned, 5000}, {kRealloc, 50},
                {kFree, 0},        {kFree, 0},       {kFree, 0},       {kFree, 0},       {kFree, 0},
                {kFree, 0},        {kFree, 0},       {kFree, 0}};
  ASSERT_EQ(shape(expected), spec);
  EXPECT_EQ(expected[9].old_addr, 0u) << "realloc(NULL, 50) has no old block";
  EXPECT_EQ(expected[10].addr, expected[9].addr) << "realloc(p, 0) frees p";

  std::vector<Event> window;
  ASSERT_TRUE(marker_window(f.recorded.rec.events, pid, &window));
  EXPECT_TRUE(same_events(window, expected));
  EXPECT_TRUE(consistent_addresses(window, true));
}

TEST_F(Record, CppNewDeleteEachCountedOnce) {
  FixtureRun f = run_fixture(dir_, {FX_CPP, "all"});
  ASSERT_FALSE(HasFailure());
  int pid = only_pid(f.gt);
  const auto& expected = f.gt.of(pid);
  Shape spec = {{kMalloc, 4},    {kFree, 0}, {kMalloc, 80},   {kFree, 0}, {kAligned, 128}, {kFree, 0},
                {kAligned, 384}, {kFree, 0}, {kMalloc, 48},   {kFree, 0}, {kMalloc, 100},  {kFree, 0},
                {kMalloc, 48},   {kFree, 0}, {kAligned, 256}, {kFree, 0}, {kMalloc, 80},   {kFree, 0}};
  ASSERT_EQ(shape(expected), spec);
  std::vector<Event> window;
  ASSERT_TRUE(marker_window(f.recorded.rec.events, pid, &window));
  EXPECT_TRUE(same_events(window, expected));
  EXPECT_TRUE(consistent_addresses(window, true));
}

// A failing operator new (the fixture catches the bad_alloc) records nothing
// for the failed call, the program behaves as without memtrack, and the
// allocation afterwards is recorded. libstdc++'s operators are not probed
// (they wrap malloc), so the exception object's own malloc and free may be
// recorded before it: one matched pair, never an unmatched event.
// Returns the trailer's counters (empty without a trailer).
std::map<std::string, uint64_t> expect_failed_new_records_nothing(const TempDir& dir, const std::string& fixture,
                                                                  const std::string& scenario) {
  FixtureRun f = run_fixture(dir, {fixture, scenario});
  std::map<std::string, uint64_t> counters;
  if (f.recorded.rec.read.trailer) counters = f.recorded.rec.read.trailer->counters;
  if (::testing::Test::HasFailure()) return counters;
  int pid = only_pid(f.gt);
  const auto& expected = f.gt.of(pid);
  EXPECT_EQ(shape(expected), (Shape{{kMalloc, 4}, {kFree, 0}}));
  std::vector<Event> window;
  EXPECT_TRUE(marker_window(f.recorded.rec.events, pid, &window));
  EXPECT_TRUE(consistent_addresses(window, true));
  if (window.size() < expected.size()) {
    ADD_FAILURE() << "the window holds " << window.size() << " events";
    return counters;
  }
  std::vector<Event> tail(window.end() - static_cast<long>(expected.size()), window.end());
  EXPECT_TRUE(same_events(tail, expected));
  EXPECT_LE(window.size(), expected.size() + 2);
  return counters;
}

// The recorder put the probed call's return address back, every time.
void expect_return_restored(const std::map<std::string, uint64_t>& counters) {
  auto value = [&](const std::string& name) { return counters.count(name) ? counters.at(name) : ~0ull; };
  // The stops and resumes around it, should the restore come too late.
  std::string holds;
  for (const char* name : {"stops_refused", "backpressure_pauses", "stack_walks_no_rule", "unwind_rules_learned",
                           "attach_requests_handled", "stack_rewalks"})
    holds += std::string(" ") + name + " " + std::to_string(value(name));
  EXPECT_EQ(value("unwind_restores_requested"), 1u) << holds;
  EXPECT_EQ(value("unwind_restores_failed"), 0u) << holds;
  EXPECT_EQ(value("unwind_restores_lost"), 0u);
  EXPECT_EQ(value("stops_refused"), 0u);
}

// new (std::nothrow) that fails: libstdc++ throws and catches inside.
TEST_F(Record, CppFailedNothrowNewRecordsNothing) { expect_failed_new_records_nothing(dir_, FX_CPP, "nothrow_fail"); }

// operator new that throws bad_alloc to the fixture, which catches it.
TEST_F(Record, CppFailedThrowingNewLeavesNoUnmatchedEvent) {
  expect_failed_new_records_nothing(dir_, FX_CPP, "badalloc");
}

// Another recording at the same time: the uprobe session links it makes for
// its own processes (per-process probes, Linux >= 6.13) want the return of
// every call their task filter turns away, so the kernel used to put the
// trampoline at the return of this program's _Unwind_RaiseException (where
// the unwinder starts): every throw aborted in std::terminate.
TEST_F(Record, AnotherRecordingLeavesThisProgramsExceptionsAlone) {
  Child other(with_run_options({MEMTRACK_BIN, "record", "-q", "-o", dir_.file("other.zst"), "--", FX_CPP, "wait"}));
  ASSERT_TRUE(other.wait_for_stdout("\n", 60s)) << "the other recording's program did not start: " << other.err();
  int other_pid = 0;
  ASSERT_EQ(std::sscanf(other.out().c_str(), "ready %d", &other_pid), 1) << other.out();
  for (int run = 0; run < 3 && !HasFailure(); ++run) expect_failed_new_records_nothing(dir_, FX_CPP, "badalloc");
  ASSERT_EQ(kill(other_pid, SIGUSR1), 0);
  RunResult done = other.finish(60s);
  EXPECT_FALSE(done.timed_out) << done.describe();
  EXPECT_EQ(done.exit_code(), 0) << done.describe();
}

// An allocator's own operator new is probed at entry and return: the
// bad_alloc it throws must pass the return probe (the recorder puts the
// return address back), the program runs on, and nothing is recorded for
// the failed call. Without that, the program aborts in std::terminate.
TEST_F(Record, JemallocOperatorNewThrowsThroughItsReturnProbe) {
  SKIP_UNLESS_BUILT(FX_JEMALLOC_STATIC, "libjemalloc.a");
  expect_return_restored(expect_failed_new_records_nothing(dir_, FX_JEMALLOC_STATIC, "badalloc"));
}

TEST_F(Record, TcmallocOperatorNewThrowsThroughItsReturnProbe) {
  SKIP_UNLESS_BUILT(FX_TCMALLOC_STATIC, "libtcmalloc_minimal.a");
  expect_return_restored(expect_failed_new_records_nothing(dir_, FX_TCMALLOC_STATIC, "badalloc"));
}

// A block freed by one thread, handed back by malloc and freed again later
// from deeper frames is two frees, not a wrapper (operator delete -> free)
// repeating one.
TEST_F(Record, RecycledBlockFreedTwiceIsTwoFrees) {
  FixtureRun f = run_fixture(dir_, {FX_LIBC, "recycle"});
  ASSERT_FALSE(HasFailure());
  int pid = only_pid(f.gt);
  ASSERT_EQ(f.gt.info1(pid, "recycled"), "1") << "malloc did not hand the block back: nothing tested";
  const auto& expected = f.gt.of(pid);
  ASSERT_EQ(shape(expected), (Shape{{kMalloc, 2000}, {kFree, 0}, {kMalloc, 2000}, {kFree, 0}}));
  std::vector<Event> window;
  ASSERT_TRUE(marker_window(f.recorded.rec.events, pid, &window));
  EXPECT_TRUE(same_events(window, expected));
}

TEST_F(Record, ThreadsEveryEventWithItsThread) {
  constexpr int kThreads = 4, kPairs = 2000;
  FixtureRun f = run_fixture(dir_, {FX_LIBC, "threads", std::to_string(kThreads), std::to_string(kPairs)});
  ASSERT_FALSE(HasFailure());
  int pid = only_pid(f.gt);
  const auto& expected = f.gt.of(pid);
  ASSERT_EQ(expected.size(), size_t{kThreads} * kPairs * 2);
  std::map<int, std::vector<Event>> expected_by_tid;
  for (const auto& e : expected) expected_by_tid[e.tid].push_back(e);
  ASSERT_EQ(expected_by_tid.size(), size_t{kThreads}) << "the fixture's threads should have distinct tids";
  std::set<uint64_t> sizes;
  for (const auto& [tid, events] : expected_by_tid) {
    EXPECT_NE(tid, pid) << "a worker thread reported the main thread's tid";
    sizes.insert(events.front().size);
  }
  EXPECT_EQ(sizes.size(), size_t{kThreads}) << "each thread allocates its own size";

  std::vector<Event> window;
  ASSERT_TRUE(marker_window(f.recorded.rec.events, pid, &window));
  EXPECT_EQ(window.size(), expected.size());
  std::set<int> recorded_tids;
  for (const auto& e : window) recorded_tids.insert(e.tid);
  std::set<int> expected_tids;
  for (const auto& [tid, events] : expected_by_tid) expected_tids.insert(tid);
  EXPECT_EQ(recorded_tids, expected_tids);
  for (const auto& [tid, events] : expected_by_tid) {
    SCOPED_TRACE("thread " + std::to_string(tid));
    EXPECT_TRUE(same_events(of_tid(window, tid), events));
  }
  EXPECT_TRUE(consistent_addresses(window, true));
  EXPECT_TRUE(ordered_per_thread(window));
}

// An exiting thread's tcache, which glibc frees itself with direct calls (the
// blocks the program freed already, and the cache, which malloc never
// returned), is no free of the program's: every recorded free is of a live
// block. The uprobes count those calls.
TEST_F(Record, ExitingThreadsCacheIsNotRecordedAsFrees) {
  constexpr uint64_t kThreads = 8, kTcacheBlocks = 64 * 7;
  FixtureRun f = run_fixture(dir_, {FX_LIBC, "tcachethreads", std::to_string(kThreads)});
  ASSERT_FALSE(HasFailure());
  std::vector<Event> allocator_events;
  for (const Event& e : f.recorded.rec.events)
    if (is_alloc_event(e)) allocator_events.push_back(e);
  EXPECT_TRUE(consistent_addresses(allocator_events, false));
  auto frees = std::count_if(allocator_events.begin(), allocator_events.end(),
                             [](const Event& e) { return e.type == kFree; });
  EXPECT_GE(static_cast<uint64_t>(frees), kThreads * kTcacheBlocks);
  const std::vector<std::string> options = run_record_options();
  if (std::find(options.begin(), options.end(), "--uprobes") != options.end()) {
    EXPECT_GE(f.recorded.rec.read.trailer->counters.at("runtime_frees_left_out"), kThreads);
  }
}

TEST_F(Record, ForkChildRecordedUnderItsPid) {
  FixtureRun f = run_fixture(dir_, {FX_LIBC, "fork"});
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(f.gt.pids().size(), 2u) << "ground truth from parent and child expected";
  int child = 0;
  int parent = 0;
  for (int pid : f.gt.pids())
    if (!f.gt.info1(pid, "child").empty()) {
      parent = pid;
      child = std::stoi(f.gt.info1(pid, "child"));
    }
  ASSERT_NE(parent, 0);
  ASSERT_NE(child, parent);
  ASSERT_EQ(shape(f.gt.of(parent)), (Shape{{kMalloc, 256}, {kFree, 0}}));
  ASSERT_EQ(shape(f.gt.of(child)), (Shape{{kMalloc, 512}, {kFree, 0}}));
  const auto& events = f.recorded.rec.events;

  std::vector<Event> window;
  ASSERT_TRUE(marker_window(events, parent, &window));
  EXPECT_TRUE(same_events(window, f.gt.of(parent)));
  // The child made no other allocator call: all its events, no window.
  std::vector<Event> child_events = of_pid(events, child, true);
  EXPECT_TRUE(same_events(child_events, f.gt.of(child)));

  std::vector<Event> forks;
  for (const auto& e : events)
    if (e.type == EventType::Fork && e.pid == child) forks.push_back(e);
  ASSERT_EQ(forks.size(), 1u) << "one Fork record for the child " << child;
  EXPECT_EQ(forks[0].parent_pid, parent);
  if (!child_events.empty()) {
    EXPECT_LE(forks[0].timestamp, child_events.front().timestamp);
  }
  bool child_exit = false;
  for (const auto& e : events)
    if (e.type == EventType::Exit && e.pid == child) {
      child_exit = true;
      EXPECT_EQ(e.exit_code, 0) << "the child's _exit(0) as a wait status";
    }
  EXPECT_TRUE(child_exit) << "no Exit record for the child";
}

// A child made by fork, vfork (sharing the parent's memory until it execs)
// or posix_spawn execs another program: its Fork and Exec records and every
// allocation of the new image are recorded.
void expect_exec_child_recorded(const TempDir& dir, const std::string& how) {
  FixtureRun f = run_fixture(dir, {FX_LIBC, how, FX_LIBC});
  ASSERT_FALSE(::testing::Test::HasFailure());
  int parent = 0, child = 0;
  for (const auto& [key, values] : f.gt.info)
    if (key.second == "child") {
      parent = key.first;
      child = std::stoi(values.front());
    }
  ASSERT_NE(child, 0) << "the fixture did not report its child";
  const auto& expected = f.gt.of(child);
  ASSERT_EQ(expected.size(), 18u) << "the exec'd 'fx_libc all' reports its 18 events";
  const auto& events = f.recorded.rec.events;

  std::vector<Event> execs;
  for (const auto& e : events)
    if (e.type == EventType::Exec && e.pid == child) execs.push_back(e);
  ASSERT_EQ(execs.size(), 1u) << "one Exec record for pid " << child;
  ASSERT_TRUE(execs[0].image);
  EXPECT_EQ(execs[0].image->path, FX_LIBC);
  EXPECT_EQ(execs[0].image->argv, (std::vector<std::string>{FX_LIBC, "all"}));
  EXPECT_EQ(execs[0].image->comm, "fx_libc");

  bool forked = false;
  for (const auto& e : events)
    if (e.type == EventType::Fork && e.pid == child) {
      forked = true;
      EXPECT_EQ(e.parent_pid, parent);
      EXPECT_LE(e.timestamp, execs[0].timestamp);
    }
  EXPECT_TRUE(forked) << "no Fork record for pid " << child;

  std::vector<Event> window;
  ASSERT_TRUE(marker_window(events, child, &window));
  EXPECT_TRUE(same_events(window, expected));
  EXPECT_TRUE(consistent_addresses(window, true));
}

TEST_F(Record, ForkExecImageAndAllocationsOfTheNewImage) { expect_exec_child_recorded(dir_, "forkexec"); }
TEST_F(Record, VforkExecImageAndAllocationsOfTheNewImage) { expect_exec_child_recorded(dir_, "vforkexec"); }
TEST_F(Record, PosixSpawnImageAndAllocationsOfTheNewImage) { expect_exec_child_recorded(dir_, "spawnexec"); }


TEST_F(Record, DlopenedAllocatorProbedBeforeItsFirstCall) {
  FixtureRun f = run_fixture(dir_, {FX_LIBC, "dlopen", FX_FAKEALLOC});
  ASSERT_FALSE(HasFailure());
  int pid = only_pid(f.gt);
  const auto& expected = f.gt.of(pid);
  ASSERT_EQ(expected.size(), 200u);
  std::vector<Event> window;
  ASSERT_TRUE(marker_window(f.recorded.rec.events, pid, &window));
  size_t mallocs = 0, frees = 0;
  for (const auto& e : window) {
    mallocs += e.type == kMalloc && e.size == 4242;
    frees += e.type == kFree;
  }
  EXPECT_EQ(mallocs, 100u);
  EXPECT_EQ(frees, 100u);
  EXPECT_TRUE(same_events(window, expected));
}

TEST_F(Record, StaticJemalloc) {
  SKIP_UNLESS_BUILT(FX_JEMALLOC_STATIC, "libjemalloc.a");
  FixtureRun f = run_fixture(dir_, {FX_JEMALLOC_STATIC});
  ASSERT_FALSE(HasFailure());
  int pid = only_pid(f.gt);
  ASSERT_FALSE(f.gt.info1(pid, "jemalloc").empty()) << "the fixture did not identify jemalloc";
  const auto& expected = f.gt.of(pid);
  Shape spec = {{kMalloc, 100},  {kFree, 0}, {kCalloc, 100},  {kRealloc, 5000}, {kFree, 0}, {kAligned, 256},
                {kFree, 0},      {kAligned, 512}, {kFree, 0}, {kMalloc, 300}, {kRealloc, 9000}, {kFree, 0},
                {kMalloc, 700},  {kFree, 0}, {kMalloc, 24},   {kFree, 0},       {kMalloc, 132}, {kFree, 0}};
  ASSERT_EQ(shape(expected), spec);
  std::vector<Event> window;
  ASSERT_TRUE(marker_window(f.recorded.rec.events, pid, &window));
  EXPECT_TRUE(same_events(window, expected));
  EXPECT_TRUE(consistent_addresses(window, true));
}

TEST_F(Record, StaticTcmalloc) {
  SKIP_UNLESS_BUILT(FX_TCMALLOC_STATIC, "libtcmalloc_minimal.a");
  FixtureRun f = run_fixture(dir_, {FX_TCMALLOC_STATIC});
  ASSERT_FALSE(HasFailure());
  int pid = only_pid(f.gt);
  ASSERT_FALSE(f.gt.info1(pid, "tcmalloc").empty()) << "the fixture did not identify tcmalloc";
  const auto& expected = f.gt.of(pid);
  Shape spec = {{kMalloc, 100},   {kFree, 0}, {kCalloc, 200},  {kRealloc, 6000}, {kFree, 0},
                {kMalloc, 333},   {kRealloc, 7777}, {kFree, 0}, {kCalloc, 120},  {kFree, 0},
                {kAligned, 1024}, {kFree, 0}, {kAligned, 640}, {kFree, 0},       {kMalloc, 40},
                {kFree, 0},       {kAligned, 192}, {kFree, 0}, {kMalloc, 72},    {kFree, 0}};
  ASSERT_EQ(shape(expected), spec);
  std::vector<Event> window;
  ASSERT_TRUE(marker_window(f.recorded.rec.events, pid, &window));
  EXPECT_TRUE(same_events(window, expected));
  EXPECT_TRUE(consistent_addresses(window, true));
}

TEST_F(Record, Mimalloc) {
  SKIP_UNLESS_BUILT(FX_MIMALLOC, "libmimalloc");
  FixtureRun f = run_fixture(dir_, {FX_MIMALLOC});
  ASSERT_FALSE(HasFailure());
  int pid = only_pid(f.gt);
  std::cerr << "[ info     ] malloc served by mimalloc's override: " << f.gt.info1(pid, "malloc_is_mimalloc")
            << "\n";
  const auto& expected = f.gt.of(pid);
  Shape spec = {{kMalloc, 100}, {kRealloc, 3000}, {kFree, 0}, {kCalloc, 100}, {kFree, 0},
                {kCalloc, 64},  {kFree, 0},       {kMalloc, 300}, {kFree, 0}};
  ASSERT_EQ(shape(expected), spec);
  std::vector<Event> window;
  ASSERT_TRUE(marker_window(f.recorded.rec.events, pid, &window));
  EXPECT_TRUE(same_events(window, expected));
  EXPECT_TRUE(consistent_addresses(window, true));
}

// ---------------------------------------------------------------- totals

// The window of `count N` holds exactly N Malloc(64)+Free pairs of the
// fixture's thread, in the fixture's address sequence.
void expect_exact_count_window(const std::vector<Event>& events, const GroundTruth& gt, int pid, unsigned long pairs) {
  ASSERT_EQ(std::stoul(gt.info1(pid, "count")), pairs);
  int tid = std::stoi(gt.info1(pid, "tid"));
  uint64_t fixture_hash = std::stoull(gt.info1(pid, "hash"), nullptr, 16);
  std::vector<Event> window;
  ASSERT_TRUE(marker_window(events, pid, &window));
  size_t mallocs = 0, frees = 0, others = 0, wrong_tid = 0;
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a over the addresses, as the fixture
  for (const auto& e : window) {
    if (e.type == kMalloc && e.size == 64)
      ++mallocs;
    else if (e.type == kFree)
      ++frees;
    else
      ++others;
    wrong_tid += e.tid != tid;
    for (int i = 0; i < 8; ++i) {
      hash ^= (e.addr >> (8 * i)) & 0xff;
      hash *= 0x100000001b3ull;
    }
  }
  EXPECT_EQ(mallocs, pairs);
  EXPECT_EQ(frees, pairs);
  EXPECT_EQ(others, 0u);
  EXPECT_EQ(wrong_tid, 0u);
  EXPECT_EQ(hash, fixture_hash) << "the recorded address sequence differs from the fixture's";
  EXPECT_TRUE(consistent_addresses(window, true));
  EXPECT_TRUE(ordered_per_thread(window));
}

TEST_F(Record, ExactTotalsOfALongRunWithoutLoss) {
  constexpr unsigned long kPairs = 100000;
  FixtureRun f = run_fixture(dir_, {FX_LIBC, "count", std::to_string(kPairs)}, std::chrono::seconds(120));
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(f.gt.info.size(), 3u) << "expected the fixture's tid, count and hash";
  expect_exact_count_window(f.recorded.rec.events, f.gt, f.gt.info.begin()->first.first, kPairs);
}

// A signal handler's allocator calls are calls of their own, not inner calls
// of the one it interrupted: each handler run's malloc(24)/free pair is
// recorded, or counted in the trailer as dropped (the fast path drops the
// calls of a handler that interrupts the write of an event; the uprobe path
// those of handlers nested too deep). The handler runs every 100 us.
uint64_t handler_calls_dropped(const Recording& rec, const std::string& suffix) {
  uint64_t dropped = 0;
  for (const auto& [name, value] : rec.read.trailer->counters)
    if (name.ends_with(suffix)) dropped += value;
  return dropped;
}

void expect_handler_calls_recorded(const TempDir& dir, const std::string& how) {
  constexpr unsigned long kPairs = 300000;
  Recorded r = record_command(dir, {FX_SIGNALS, std::to_string(kPairs), how}, std::chrono::seconds(150));
  ASSERT_EQ(r.run.exit_code(), 0) << r.run.describe();
  ASSERT_TRUE(clean_read(r.rec));
  GroundTruth gt = parse_ground_truth(r.run.out);
  ASSERT_EQ(gt.info.size(), 2u) << r.run.describe();
  int pid = gt.info.begin()->first.first;
  uint64_t runs = std::stoull(gt.info1(pid, "handler_runs"));
  ASSERT_GT(runs, 20u) << "too few handler runs to interrupt allocator calls";
  std::vector<Event> window;
  ASSERT_TRUE(marker_window(r.rec.events, pid, &window));
  uint64_t main_mallocs = 0, handler_mallocs = 0, frees = 0, others = 0;
  for (const auto& e : window) {
    if (e.type == kMalloc && e.size == 64)
      ++main_mallocs;
    else if (e.type == kMalloc && e.size == 24)
      ++handler_mallocs;
    else if (e.type == kFree)
      ++frees;
    else
      ++others;
  }
  uint64_t allocations_dropped = handler_calls_dropped(r.rec, "handler_allocations_dropped");
  uint64_t frees_dropped = handler_calls_dropped(r.rec, "handler_frees_dropped");
  EXPECT_EQ(main_mallocs, kPairs);
  EXPECT_EQ(handler_mallocs + allocations_dropped, runs)
      << handler_mallocs << " recorded, " << allocations_dropped << " counted as dropped";
  EXPECT_EQ(frees + frees_dropped, kPairs + runs) << frees << " recorded, " << frees_dropped << " counted as dropped";
  EXPECT_EQ(others, 0u);
  EXPECT_TRUE(consistent_addresses(window, true));
}

TEST_F(Record, SignalHandlerCallsInstalledBySigaction) { expect_handler_calls_recorded(dir_, "sigaction"); }
TEST_F(Record, SignalHandlerCallsInstalledBySignal) { expect_handler_calls_recorded(dir_, "signal"); }

// A second thread execs: the kernel makes it the thread group leader, and
// probes filtered on the old leader would no longer match the process.
TEST_F(Record, ExecFromASecondThreadKeepsRecording) {
  Recorded r = record_command(dir_, {FX_LIBC, "threadexec", FX_LIBC});
  ASSERT_EQ(r.run.exit_code(), 0) << r.run.describe();
  EXPECT_TRUE(clean_read(r.rec));
  EXPECT_TRUE(no_losses(r.rec));
  GroundTruth gt = parse_ground_truth(r.run.out);
  ASSERT_EQ(gt.info.size(), 3u) << r.run.describe();
  int pid = gt.info.begin()->first.first;
  size_t execs = 0;
  for (const auto& e : r.rec.events) execs += e.type == EventType::Exec && e.pid == pid;
  EXPECT_EQ(execs, 2u) << "the fixture and the image its thread exec'd";
  expect_exact_count_window(r.rec.events, gt, pid, 1000);
}

// The fallbacks for older kernels record exactly the same: global probes
// (filtered in BPF) and classic perf uprobes, alone and together.
TEST_F(Record, ExactTotalsInEveryProbeMode) {
  constexpr unsigned long kPairs = 20000;
  for (const auto& mode : std::vector<std::vector<std::string>>{
           {"--global-probes"}, {"--uprobes", "--classic-uprobes"}, {"--classic-uprobes", "--global-probes"}}) {
    SCOPED_TRACE(mode.size() == 1 ? mode[0] : mode[0] + " " + mode[1]);
    Recorded r = record_command(dir_, {FX_LIBC, "count", std::to_string(kPairs)}, std::chrono::seconds(120), {},
                                mode);
    ASSERT_EQ(r.run.exit_code(), 0) << r.run.describe();
    EXPECT_TRUE(clean_read(r.rec));
    EXPECT_TRUE(no_losses(r.rec));
    GroundTruth gt = parse_ground_truth(r.run.out);
    ASSERT_EQ(gt.info.size(), 3u) << r.run.describe();
    expect_exact_count_window(r.rec.events, gt, gt.info.begin()->first.first, kPairs);
  }
}

// A ring far too small for four processes allocating flat out on two CPUs
// (128 KiB: on a machine where each probe hit costs microseconds, 256 KiB was
// drained before it ever filled; 64 KiB is below the slack the kernel's
// every-64th-event fill check needs): the kernel pauses the producers
// instead of dropping, and every event of every process arrives.
TEST_F(Record, BackpressurePausesProducersAndLosesNothing) {
  constexpr unsigned long kPairs = 100000;
  std::string n = std::to_string(kPairs), fx = FX_LIBC;
  std::string script = fx + " count " + n + " & " + fx + " count " + n + " & " + fx + " count " + n + " & " + fx +
                       " count " + n + " & wait";
  Recorded r = record_command(dir_, {"/bin/sh", "-c", script}, std::chrono::seconds(120), {}, {"--ring-mib", "0.125"});
  ASSERT_EQ(r.run.exit_code(), 0) << r.run.describe();
  EXPECT_TRUE(clean_read(r.rec));
  EXPECT_TRUE(no_losses(r.rec));
  ASSERT_TRUE(r.rec.read.trailer);
  const auto& counters = r.rec.read.trailer->counters;
  const auto& options = run_record_options();
  if (std::find(options.begin(), options.end(), "--uprobes") == options.end()) {
    // The interposers write into shared memory, not the kernel's ring: what
    // is tested is that the four of them lose nothing either.
    EXPECT_GE(counters.at("interposed_processes"), 4u);
  } else {
    EXPECT_GT(counters.at("backpressure_pauses"), 0u) << "the ring never filled: nothing tested";
    EXPECT_EQ(counters.at("producers_resumed"), counters.at("backpressure_pauses"));
  }
  GroundTruth gt = parse_ground_truth(r.run.out);
  std::set<int> pids;
  for (const auto& [key, values] : gt.info) pids.insert(key.first);
  ASSERT_EQ(pids.size(), 4u);
  for (int pid : pids) {
    SCOPED_TRACE("pid " + std::to_string(pid));
    expect_exact_count_window(r.rec.events, gt, pid, kPairs);
  }
}

// ------------------------------------------------------- process handling

TEST_F(Record, ExitStatusIsTheCommands) {
  Recorded r = record_command(dir_, {"/bin/sh", "-c", "exit 7"});
  EXPECT_FALSE(r.run.timed_out);
  EXPECT_EQ(r.run.exit_code(), 7) << r.run.describe();
  ASSERT_TRUE(r.rec.read.trailer) << "artifact not finalized";
  EXPECT_TRUE(WIFEXITED(r.rec.read.trailer->exit_status));
  EXPECT_EQ(WEXITSTATUS(r.rec.read.trailer->exit_status), 7);
}

TEST_F(Record, ExitStatusOfACommandKilledBySignal) {
  Recorded r = record_command(dir_, {"/bin/sh", "-c", "kill -TERM $$"});
  EXPECT_FALSE(r.run.timed_out);
  EXPECT_EQ(r.run.exit_code(), 128 + SIGTERM) << r.run.describe();
  ASSERT_TRUE(r.rec.read.trailer) << "artifact not finalized";
  EXPECT_TRUE(WIFSIGNALED(r.rec.read.trailer->exit_status));
  EXPECT_EQ(WTERMSIG(r.rec.read.trailer->exit_status), SIGTERM);
}

TEST_F(Record, MissingCommandFailsWithAClearMessage) {
  const std::string missing = dir_.file("no-such-command");
  Recorded r = record_command(dir_, {missing, "arg"}, std::chrono::seconds(30));
  EXPECT_FALSE(r.run.timed_out) << r.run.describe();
  EXPECT_TRUE(r.run.exited()) << r.run.describe();
  EXPECT_NE(r.run.exit_code(), 0) << r.run.describe();
  EXPECT_NE(r.run.err.find("No such file or directory"), std::string::npos) << r.run.describe();
  EXPECT_NE(r.run.err.find(missing), std::string::npos) << "the message should name the command; "
                                                         << r.run.describe();
}

// Under sudo the command runs as the invoking user (SUDO_UID/SUDO_GID), not
// as root, and is still recorded.
TEST_F(Record, SudoRunsTheCommandAsTheInvokingUser) {
  if (geteuid() != 0) GTEST_SKIP() << "*** SKIPPED: needs root to change user, as under sudo ***";
  SpawnOptions options;
  options.env = {{"SUDO_UID", "65534"}, {"SUDO_GID", "65534"}};
  Recorded r = record_command(dir_, {"/bin/sh", "-c", "id -u; id -g"}, std::chrono::seconds(60), options);
  ASSERT_EQ(r.run.exit_code(), 0) << r.run.describe();
  EXPECT_EQ(r.run.out, "65534\n65534\n");
  EXPECT_TRUE(clean_read(r.rec));
  size_t allocations = 0;
  for (const auto& e : r.rec.events) allocations += is_allocation(e.type);
  EXPECT_GT(allocations, 0u) << "the command's allocations are recorded";
}

TEST_F(Record, CommandKeepsWorkingDirectoryAndEnvironment) {
  std::string cwd = dir_.file("work dir");
  std::filesystem::create_directory(cwd);
  cwd = std::filesystem::canonical(cwd).string();
  SpawnOptions options;
  options.cwd = cwd;
  options.env = {{"MEMTRACK_TEST_FOO", "foo value 42"}};
  // pwd -P: the directory from getcwd, not from $PWD.
  std::vector<std::string> argv = with_run_options({MEMTRACK_BIN, "record", "-q", "-o", dir_.file("a.zst"), "--",
                                                    "/bin/sh", "-c", "pwd -P; echo \"$MEMTRACK_TEST_FOO\""});
  RunResult r = run_process(argv, std::chrono::seconds(60), options);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code(), 0) << r.describe();
  EXPECT_EQ(r.out, cwd + "\nfoo value 42\n");
  EXPECT_TRUE(std::filesystem::exists(dir_.file("a.zst"))) << "the artifact goes to the given path";
}

// ----------------------------------------------------------- no leftovers

bool tracing_mounted() {
  std::ifstream mounts("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mounts, line))
    if (line.find(" - debugfs ") != std::string::npos || line.find(" - tracefs ") != std::string::npos) return true;
  return false;
}

// The ids of the loaded BPF objects of `kind` ("prog" or "link"), from the
// "ID: ..." lines of `bpftool KIND show`, with those lines.
std::map<unsigned, std::string> bpf_objects(const std::string& kind) {
  // bpftool fails when an object it listed is freed before it reads it
  // ("can't get link by id: Resource temporarily unavailable"): other tests
  // may be recording concurrently. Retry.
  RunResult r;
  for (int attempt = 0; attempt < 10; ++attempt) {
    r = run_process({"/usr/sbin/bpftool", kind, "show"}, std::chrono::seconds(20));
    if (r.exit_code() == 0) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(r.exit_code(), 0) << "bpftool " << kind << " show: " << r.describe();
  std::map<unsigned, std::string> ids;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && std::isdigit(static_cast<unsigned char>(line[0])))
      ids[static_cast<unsigned>(std::stoul(line))] = line;
  return ids;
}

// The BPF program and link ids some live process holds a descriptor of, from
// /proc/*/fdinfo ("prog_id:" / "link_id:").
void held_bpf_ids(std::set<unsigned>* progs, std::set<unsigned>* links) {
  for (const auto& proc : std::filesystem::directory_iterator("/proc")) {
    std::string name = proc.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::error_code ec;
    for (const auto& fd : std::filesystem::directory_iterator(proc.path() / "fdinfo", ec)) {
      std::ifstream info(fd.path());
      std::string line;
      while (std::getline(info, line)) {
        if (line.rfind("prog_id:", 0) == 0) progs->insert(static_cast<unsigned>(std::stoul(line.substr(8))));
        if (line.rfind("link_id:", 0) == 0) links->insert(static_cast<unsigned>(std::stoul(line.substr(8))));
      }
    }
  }
}

// Inside an unprivileged user namespace root's capabilities do not reach the
// kernel's checks for tracing programs: recording fails before running the
// command, says why and what to grant, and writes nothing.
TEST_F(Record, InAUserNamespaceSaysWhatToGrant) {
  if (!std::filesystem::exists("/usr/bin/unshare")) GTEST_SKIP() << "*** SKIPPED: /usr/bin/unshare not installed ***";
  std::string marker = dir_.file("ran");
  RunResult r = run_process(with_run_options({"/usr/bin/unshare", "--user", "--map-root-user", MEMTRACK_BIN,
                                              "record", "-o", dir_.file("a.zst"), "--", "/usr/bin/touch", marker}),
                            std::chrono::seconds(60));
  ASSERT_FALSE(r.timed_out);
  if (r.exit_code() == 0) GTEST_SKIP() << "*** SKIPPED: this kernel let a user namespace load tracing programs ***";
  EXPECT_NE(r.err.find("runs in a user namespace"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("CAP_BPF and CAP_PERFMON"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("BPF token"), std::string::npos) << r.describe();
  EXPECT_FALSE(std::filesystem::exists(dir_.file("a.zst")));
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the command ran although nothing could be recorded";
}

TEST_F(Record, LeavesNoProbesOrProgramsBehind) {
  if (!std::filesystem::exists("/usr/sbin/bpftool")) GTEST_SKIP() << "*** SKIPPED: /usr/sbin/bpftool not installed ***";
  // debugfs/tracefs are not needed: when they are mounted, memtrack runs in a
  // mount namespace without them.
  bool mounted = tracing_mounted();
  auto progs_before = bpf_objects("prog"), links_before = bpf_objects("link");
  std::vector<std::string> command =
      with_run_options({MEMTRACK_BIN, "record", "-q", "-o", dir_.file("a.zst"), "--", "/bin/true"});
  if (mounted) {
    command.insert(command.begin(),
                   {"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
                    "umount -l /sys/kernel/debug 2>/dev/null; umount -l /sys/kernel/tracing 2>/dev/null; exec \"$@\"",
                    "sh"});
  }
  RunResult r = run_process(command, std::chrono::seconds(60));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code(), 0) << r.describe();
  ASSERT_TRUE(std::filesystem::exists(dir_.file("a.zst"))) << "no artifact";
  Recording rec = read_recording(dir_.file("a.zst"));
  EXPECT_TRUE(clean_read(rec));
  ASSERT_TRUE(rec.read.trailer);
  // Probes were attached, so there was something to leave behind.
  EXPECT_GT(rec.read.trailer->counters["probes_attached"], 0u);

  // Objects that appeared while memtrack ran and that no live process holds
  // (other tests may be recording concurrently) must go away: the kernel
  // frees a released program a little later, so poll for a few seconds.
  std::vector<std::string> leaked;
  for (auto deadline = Clock::now() + 10s;;) {
    leaked.clear();
    std::set<unsigned> held_progs, held_links;
    auto progs = bpf_objects("prog"), links = bpf_objects("link");
    held_bpf_ids(&held_progs, &held_links);
    for (const auto& [id, line] : progs)
      if (!progs_before.count(id) && !held_progs.count(id)) leaked.push_back("program " + line);
    for (const auto& [id, line] : links)
      if (!links_before.count(id) && !held_links.count(id)) leaked.push_back("link " + line);
    if (leaked.empty() || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(200ms);
  }
  for (const auto& l : leaked) ADD_FAILURE() << "BPF object left behind 10 s after memtrack exited: " << l;
  std::cerr << "[ info     ] debugfs/tracefs mounted: " << (mounted ? "yes (hidden in a mount namespace)" : "no")
            << "\n";
}

// ----------------------------------------------------------------- signals


// The pid of a child or grandchild of `parent` (memtrack runs the command
// from its recorder process) whose comm is `comm`, or 0.
pid_t child_named(pid_t parent, const std::string& comm) {
  DIR* d = opendir("/proc");
  if (!d) return 0;
  pid_t found = 0;
  while (dirent* ent = readdir(d)) {
    pid_t pid = std::atoi(ent->d_name);
    if (pid <= 0) continue;
    std::string text = read_proc_text("/proc/" + std::to_string(pid) + "/stat").value_or("");
    size_t open = text.find('('), close = text.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::string name = text.substr(open + 1, close - open - 1);
    std::istringstream rest(text.substr(close + 2));
    char state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if ((ppid == parent || parent_of(ppid) == parent) && name == comm) {
      found = pid;
      break;
    }
  }
  closedir(d);
  return found;
}

// SIGINT to memtrack alone (kill -INT PID), or to memtrack's whole process
// group as a terminal's Ctrl-C does (kill -INT -PGID: the command gets it
// directly too): memtrack stops the command, reports the interruption as
// 128 + SIGINT and finalizes the artifact.
void sigint_stops_recording(const TempDir& dir, bool whole_group) {
  Child memtrack(with_run_options({MEMTRACK_BIN, "record", "-q", "-o", dir.file("a.zst"), "--", "/bin/sleep", "30"}));
  pid_t sleeper = 0;
  for (auto deadline = Clock::now() + 20s; !sleeper && Clock::now() < deadline && !memtrack.exited_now();) {
    sleeper = child_named(memtrack.pid(), "sleep");
    if (!sleeper) std::this_thread::sleep_for(20ms);
  }
  ASSERT_NE(sleeper, 0) << "memtrack did not start sleep within 20 s; " << memtrack.finish(1s).describe();
  ASSERT_EQ(kill(whole_group ? -memtrack.pid() : memtrack.pid(), SIGINT), 0);
  // sleep 30 would run on: ending within its time is what SIGINT did.
  RunResult r = memtrack.finish(15s);
  ASSERT_FALSE(r.timed_out) << "memtrack did not exit within 15 s of SIGINT; " << r.describe();
  EXPECT_EQ(r.exit_code(), 128 + SIGINT) << r.describe();
  EXPECT_NE(kill(sleeper, 0), 0) << "sleep (pid " << sleeper << ") is still alive";
  ASSERT_TRUE(std::filesystem::exists(dir.file("a.zst"))) << "no artifact";
  Recording rec = read_recording(dir.file("a.zst"));
  EXPECT_TRUE(clean_read(rec));
  ASSERT_TRUE(rec.read.trailer);
  EXPECT_TRUE(WIFSIGNALED(rec.read.trailer->exit_status));
  EXPECT_EQ(WTERMSIG(rec.read.trailer->exit_status), SIGINT);
}

TEST_F(Record, SigintIsForwardedAndTheArtifactFinalized) { sigint_stops_recording(dir_, false); }

TEST_F(Record, SigintToTheProcessGroupStopsRecording) { sigint_stops_recording(dir_, true); }

// SIGHUP and SIGQUIT sent to memtrack's pid reach the command once; sent to
// the job's whole process group they reach it from the kernel, and memtrack
// does not forward them again. The command counts what it got (a shell
// trap) and ends by itself: memtrack exits with its status, the artifact
// finalized.
TEST_F(Record, SighupAndSigquitReachTheCommandOnce) {
  const std::string counting =
      "n=0; trap 'n=$((n+1))' HUP QUIT; echo ready; i=0; "
      "while [ $i -lt 16 ]; do sleep 0.05; i=$((i+1)); done; echo received $n";
  for (int signal : {SIGHUP, SIGQUIT}) {
    for (bool whole_group : {false, true}) {
      SCOPED_TRACE(std::string(strsignal(signal)) + (whole_group ? " to the process group" : " to memtrack"));
      Child memtrack(
          with_run_options({MEMTRACK_BIN, "record", "-q", "-o", dir_.file("a.zst"), "--", "/bin/sh", "-c", counting}));
      ASSERT_TRUE(memtrack.wait_for_stdout("ready", 20s)) << memtrack.finish(1s).describe();
      ASSERT_EQ(kill(whole_group ? -memtrack.pid() : memtrack.pid(), signal), 0);
      RunResult r = memtrack.finish(30s);
      ASSERT_FALSE(r.timed_out) << r.describe();
      EXPECT_EQ(r.exit_code(), 0) << r.describe();
      EXPECT_NE(r.out.find("received 1\n"), std::string::npos) << r.describe();
      Recording rec = read_recording(dir_.file("a.zst"));
      EXPECT_TRUE(clean_read(rec));
      EXPECT_TRUE(rec.read.trailer) << "the artifact is finalized";
    }
  }
}

// ------------------------------------------------------------------ attach

// A recording attached with --pid ends at --duration or at SIGINT (Ctrl-C)
// and leaves the process running: not killed, not left stopped.
TEST_F(Record, AttachedRecordingEndsAndLeavesTheProcessRunning) {
  for (bool by_sigint : {false, true}) {
    SCOPED_TRACE(by_sigint ? "SIGINT" : "--duration");
    Child fixture({FX_LIBC, "waitcount", "10"});
    ASSERT_TRUE(fixture.wait_for_stdout("ready ", 10s)) << "fixture did not start: " << fixture.err();
    std::vector<std::string> argv = {MEMTRACK_BIN, "record", "--pid", std::to_string(fixture.pid()), "-o",
                                     dir_.file("a.zst")};
    if (!by_sigint) argv.insert(argv.end(), {"--duration", "0.5"});
    Child memtrack(with_run_options(argv));
    ASSERT_TRUE(memtrack.wait_for_stderr("recording", 30s)) << memtrack.finish(1s).describe();
    if (by_sigint) {
      ASSERT_EQ(kill(memtrack.pid(), SIGINT), 0);
    }
    RunResult r = memtrack.finish(30s);
    ASSERT_FALSE(r.timed_out) << r.describe();
    EXPECT_EQ(r.exit_code(), 0) << r.describe();
    EXPECT_EQ(kill(fixture.pid(), 0), 0) << "the process is gone";
    std::string stat = read_proc_text("/proc/" + std::to_string(fixture.pid()) + "/stat").value_or("");
    size_t close = stat.rfind(')');
    ASSERT_NE(close, std::string::npos);
    EXPECT_NE(stat[close + 2], 'T') << "the process was left stopped: " << stat;
    // Still running as before: it goes on and ends by itself.
    ASSERT_EQ(kill(fixture.pid(), SIGUSR1), 0);
    RunResult fx = fixture.finish(30s);
    EXPECT_FALSE(fx.timed_out) << fx.describe();
    EXPECT_EQ(fx.exit_code(), 0) << fx.describe();
    EXPECT_TRUE(clean_read(read_recording(dir_.file("a.zst"))));
  }
}

TEST_F(Record, AttachToARunningProcess) {
  constexpr unsigned long kPairs = 1000;
  Child fixture({FX_LIBC, "waitcount", std::to_string(kPairs)});
  ASSERT_TRUE(fixture.wait_for_stdout("ready ", 10s)) << "fixture did not start: " << fixture.err();
  const std::string pid = std::to_string(fixture.pid());

  // The records layout: the hash below is of the recorded addresses.
  Child memtrack(
      with_run_options({MEMTRACK_BIN, "record", "--records-layout", "--pid", pid, "-o", dir_.file("a.zst")}));
  bool attached = memtrack.wait_for_stderr("recording", 30s);
  ASSERT_TRUE(attached) << "memtrack did not report that it is recording; stderr: " << memtrack.err();
  ASSERT_EQ(kill(fixture.pid(), SIGUSR1), 0);
  RunResult fx = fixture.finish(30s);
  ASSERT_FALSE(fx.timed_out) << fx.describe();
  ASSERT_EQ(fx.exit_code(), 0) << fx.describe();
  RunResult mt = memtrack.finish(30s);
  ASSERT_FALSE(mt.timed_out) << "memtrack did not end when the process exited; " << mt.describe();
  EXPECT_EQ(mt.exit_code(), 0) << mt.describe();

  ASSERT_TRUE(std::filesystem::exists(dir_.file("a.zst"))) << "no artifact";
  Recording rec = read_recording(dir_.file("a.zst"));
  EXPECT_TRUE(clean_read(rec));
  EXPECT_TRUE(no_losses(rec));
  GroundTruth gt = parse_ground_truth(fx.out);
  ASSERT_EQ(gt.info1(fixture.pid(), "count"), std::to_string(kPairs));
  uint64_t fixture_hash = std::stoull(gt.info1(fixture.pid(), "hash"), nullptr, 16);
  std::vector<Event> window;
  ASSERT_TRUE(marker_window(rec.events, fixture.pid(), &window));
  ASSERT_EQ(window.size(), 2 * kPairs);
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < window.size(); ++i) {
    const Event& e = window[i];
    if (i % 2 == 0)
      EXPECT_TRUE(e.type == kMalloc && e.size == 64) << "#" << i << ": " << describe(e);
    else
      EXPECT_TRUE(e.type == kFree && e.addr == window[i - 1].addr) << "#" << i << ": " << describe(e);
    for (int b = 0; b < 8; ++b) {
      hash ^= (e.addr >> (8 * b)) & 0xff;
      hash *= 0x100000001b3ull;
    }
  }
  EXPECT_EQ(hash, fixture_hash);

  // The process found running is named by an Exec record read from /proc,
  // ahead of its events.
  ASSERT_FALSE(rec.events.empty());
  const Event& first = rec.events.front();
  EXPECT_EQ(first.type, EventType::Exec);
  EXPECT_EQ(first.pid, fixture.pid());
  ASSERT_TRUE(first.image);
  EXPECT_EQ(first.image->path, std::filesystem::canonical(FX_LIBC).string());
  EXPECT_EQ(first.image->argv, (std::vector<std::string>{FX_LIBC, "waitcount", std::to_string(kPairs)}));
}

}  // namespace
}  // namespace memtrack::testing
