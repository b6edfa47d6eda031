// `memtrack record --pid` on running processes: the interposer loaded into
// them (ptrace, dlopen) records in-process and puts the allocator entry
// points back at the end, again and again, without the program noticing;
// where that cannot be done safely the uprobes record, with the reason said.
// Needs root or CAP_BPF+CAP_PERFMON (and CAP_SYS_PTRACE); otherwise each
// test reports a loud skip.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <map>
#include <set>
#include <string>

#include "recording.h"
#include "util/proc_text.h"

namespace memtrack::testing {
namespace {

using namespace std::chrono_literals;

class Attach : public ::testing::Test {
 protected:
  void SetUp() override { MEMTRACK_REQUIRE_BPF_PRIVILEGES(); }
  TempDir dir_;
};

// The state letter of /proc/PID/stat and its tracer.
std::string process_state(pid_t pid) {
  std::string stat = read_proc_text("/proc/" + std::to_string(pid) + "/stat").value_or("");
  size_t close = stat.rfind(')');
  std::string tracer = read_proc_text("/proc/" + std::to_string(pid) + "/status").value_or("");
  size_t at = tracer.find("TracerPid:");
  return std::string(1, close == std::string::npos ? '?' : stat[close + 2]) + " tracer " +
         (at == std::string::npos ? "?" : std::to_string(std::atoi(tracer.c_str() + at + 10)));
}

// What one recording of `pid` says about its blocks: a block allocated
// twice without a free between means a free was lost; frees of blocks the
// recording did not see allocated are those made before it.
struct BlockBalance {
  bool interposed = false;
  uint64_t allocations = 0, frees = 0, unmatched_frees = 0, lost_frees = 0;
};

BlockBalance balance_of(const Recording& rec, pid_t pid) {
  BlockBalance b;
  std::map<uint64_t, bool> live;
  for (const Event& e : rec.events) {
    if (e.pid != pid) continue;
    switch (e.type) {
      case EventType::Interposed: b.interposed = true; break;
      case EventType::Realloc:
        if (e.old_addr && !live.erase(e.old_addr)) ++b.unmatched_frees;
        [[fallthrough]];
      case EventType::Malloc:
      case EventType::Calloc:
      case EventType::AlignedAlloc:
        ++b.allocations;
        if (!live.emplace(e.addr, true).second) ++b.lost_frees;
        break;
      case EventType::Free:
        ++b.frees;
        if (!live.erase(e.addr)) ++b.unmatched_frees;
        break;
      default: break;
    }
  }
  return b;
}

constexpr int kThreads = 4;
constexpr uint64_t kLiveBlocksPerThread = 64;  // fx_attach.c, SLOTS

// 100 attaches and detaches to a multi-threaded program allocating all the
// time, none of whose threads waits in a system call (each attach stops one
// in the program's own code or, when all are in glibc, at malloc or free:
// both happen): it never crashes, deadlocks or stops; every recording is
// in-process and balanced (no free lost; the only unmatched frees are of
// blocks live at the attach); and it prints exactly what it prints untraced.
TEST_F(Attach, HundredAttachesAndDetachesChangeNothing) {
  RunResult untraced;
  {
    Child fixture({FX_ATTACH, std::to_string(kThreads)});
    ASSERT_TRUE(fixture.wait_for_stdout("ready ", 10s)) << fixture.finish(1s).describe();
    std::this_thread::sleep_for(300ms);
    ASSERT_EQ(kill(fixture.pid(), SIGUSR1), 0);
    untraced = fixture.finish(30s);
    ASSERT_EQ(untraced.exit_code(), 0) << untraced.describe();
  }

  Child fixture({FX_ATTACH, std::to_string(kThreads)});
  ASSERT_TRUE(fixture.wait_for_stdout("ready ", 10s)) << fixture.finish(1s).describe();
  const std::string pid = std::to_string(fixture.pid());
  uint64_t events = 0;
  std::map<std::string, uint64_t> safe_points;
  for (int i = 0; i < 100; ++i) {
    SCOPED_TRACE("attach #" + std::to_string(i + 1));
    std::string artifact = dir_.file("a" + std::to_string(i) + ".zst");
    RunResult r = run_process(with_run_options({MEMTRACK_BIN, "record", "-q", "--pid", pid, "--duration", "0.05", "-o", artifact}), 60s);
    ASSERT_FALSE(r.timed_out) << r.describe();
    ASSERT_EQ(r.exit_code(), 0) << r.describe();
    ASSERT_EQ(kill(fixture.pid(), 0), 0) << "the program is gone: " << fixture.finish(1s).describe();
    ASSERT_NE(process_state(fixture.pid())[0], 'T') << "left stopped: " << process_state(fixture.pid());
    Recording rec = read_recording(artifact);
    ASSERT_TRUE(clean_read(rec));
    ASSERT_TRUE(no_losses(rec));
    BlockBalance b = balance_of(rec, fixture.pid());
    EXPECT_TRUE(b.interposed) << "recorded by the uprobes, not in-process";
    EXPECT_GT(b.allocations, 0u);
    EXPECT_EQ(b.lost_frees, 0u) << "blocks allocated twice without a free between";
    EXPECT_LE(b.unmatched_frees, kThreads * kLiveBlocksPerThread);
    ASSERT_EQ(rec.read.trailer->counters.at("detach_in_process_pending"), 0u);
    for (const char* name : {"attach_in_program_code", "attach_at_breakpoint"})
      safe_points[name] += rec.read.trailer->counters.at(name);
    events += b.allocations + b.frees;
    std::filesystem::remove(artifact);
  }
  EXPECT_EQ(process_state(fixture.pid()).substr(1), " tracer 0");
  ASSERT_EQ(kill(fixture.pid(), SIGUSR1), 0);
  RunResult traced = fixture.finish(30s);
  ASSERT_FALSE(traced.timed_out) << traced.describe();
  EXPECT_EQ(traced.exit_code(), 0) << traced.describe();
  // "ready PID" differs; every line after it must not.
  auto after_ready = [](const std::string& out) { return out.substr(out.find('\n') + 1); };
  EXPECT_EQ(after_ready(traced.out), after_ready(untraced.out));
  EXPECT_GT(events, 100u * 1000u);
  EXPECT_GT(safe_points["attach_in_program_code"], 0u);
  EXPECT_GT(safe_points["attach_at_breakpoint"], 0u);
}

// Whether `pid` maps the shared memory of the recorder `recorder`.
bool maps_recording_of(pid_t pid, pid_t recorder) {
  std::string maps = read_proc_text("/proc/" + std::to_string(pid) + "/maps").value_or("");
  return maps.find("/dev/shm/memtrack-" + std::to_string(recorder) + "-") != std::string::npos;
}

// The recorder killed: the interposer finds it gone and puts everything
// back by itself (it unmaps the recording's memory last), and the program
// runs on.
TEST_F(Attach, KilledRecorderDetachesAnyway) {
  Child fixture({FX_ATTACH, "2"});
  ASSERT_TRUE(fixture.wait_for_stdout("ready ", 10s)) << fixture.finish(1s).describe();
  Child memtrack(with_run_options({MEMTRACK_BIN, "record", "--pid", std::to_string(fixture.pid()), "-o", dir_.file("a.zst")}));
  ASSERT_TRUE(memtrack.wait_for_stderr("Ctrl-C to stop", 30s)) << memtrack.finish(1s).describe();
  pid_t recorder = 0;  // memtrack's child whose shared memory the program maps
  for (pid_t child : children_of(memtrack.pid()))
    if (maps_recording_of(fixture.pid(), child)) recorder = child;
  ASSERT_NE(recorder, 0) << "not attached in-process: " << memtrack.err();
  ASSERT_EQ(kill(recorder, SIGKILL), 0);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (maps_recording_of(fixture.pid(), recorder) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(maps_recording_of(fixture.pid(), recorder)) << "still attached 10 s after the recorder died";
  memtrack.finish(30s);
  EXPECT_NE(process_state(fixture.pid())[0], 'T') << process_state(fixture.pid());
  ASSERT_EQ(kill(fixture.pid(), SIGUSR1), 0);
  RunResult fx = fixture.finish(30s);
  EXPECT_EQ(fx.exit_code(), 0) << fx.describe();
}

// A module dlopened while attached: its allocator calls are recorded too.
// The process's next allocator call after the dlopen redirects the module's
// entries (the one the fixture's free makes here; a plugin call before it
// would be missed). Idle at the end (in sigwait), the process makes no call
// that would detach it: the recorder makes it detach.
TEST_F(Attach, ModuleLoadedLaterIsRecorded) {
  constexpr int kBlocks = 50;
  Child fixture({FX_ATTACH, "plugin", FX_CALLPATHS_PLUGIN, std::to_string(kBlocks)});
  ASSERT_TRUE(fixture.wait_for_stdout("ready ", 10s)) << fixture.finish(1s).describe();
  Child memtrack(with_run_options({MEMTRACK_BIN, "record", "--pid", std::to_string(fixture.pid()), "-o", dir_.file("a.zst")}));
  ASSERT_TRUE(memtrack.wait_for_stderr("Ctrl-C to stop", 30s)) << memtrack.finish(1s).describe();
  ASSERT_EQ(kill(fixture.pid(), SIGUSR1), 0);
  ASSERT_TRUE(fixture.wait_for_stdout("done", 10s)) << fixture.finish(1s).describe();
  std::vector<pid_t> recorders = children_of(memtrack.pid());
  ASSERT_EQ(kill(memtrack.pid(), SIGINT), 0);
  RunResult r = memtrack.finish(30s);
  EXPECT_EQ(r.exit_code(), 0) << r.describe();
  for (pid_t recorder : recorders) EXPECT_FALSE(maps_recording_of(fixture.pid(), recorder)) << "not detached";
  ASSERT_EQ(kill(fixture.pid(), SIGUSR1), 0);
  RunResult fx = fixture.finish(30s);
  EXPECT_EQ(fx.exit_code(), 0) << fx.describe();
  Recording rec = read_recording(dir_.file("a.zst"));
  ASSERT_TRUE(clean_read(rec));
  EXPECT_EQ(rec.read.trailer->counters.at("detach_in_process_pending"), 0u);
  EXPECT_TRUE(balance_of(rec, fixture.pid()).interposed);
  int plugin_blocks = 0, frees = 0;
  std::set<uint64_t> blocks;
  for (const Event& e : rec.events) {
    if (e.pid != fixture.pid()) continue;
    if (e.type == EventType::Malloc && e.size == 4243) {
      ++plugin_blocks;
      blocks.insert(e.addr);
    }
    if (e.type == EventType::Free && blocks.count(e.addr)) ++frees;
  }
  EXPECT_GE(plugin_blocks, kBlocks - 1);
  EXPECT_EQ(frees, plugin_blocks);
}

// The recording at `artifact` read cleanly and has `fixture` (an fx_libc
// waitcount) recorded by the uprobes; let go, the fixture ends as it should.
void expect_uprobes_recorded(const std::string& artifact, Child& fixture) {
  Recording rec = read_recording(artifact);
  EXPECT_TRUE(clean_read(rec));
  EXPECT_FALSE(balance_of(rec, fixture.pid()).interposed);
  ASSERT_EQ(kill(fixture.pid(), SIGUSR1), 0);
  RunResult fx = fixture.finish(30s);
  EXPECT_EQ(fx.exit_code(), 0) << fx.describe();
}

// A tracer already attached: the attach says so and the uprobes record.
TEST_F(Attach, AnotherTracerLeavesItToTheUprobes) {
  Child fixture({FX_LIBC, "waitcount", "100"});
  ASSERT_TRUE(fixture.wait_for_stdout("ready ", 10s)) << fixture.finish(1s).describe();
  ASSERT_EQ(ptrace(PTRACE_SEIZE, fixture.pid(), 0, 0), 0) << std::strerror(errno);
  RunResult r = run_process(with_run_options({MEMTRACK_BIN, "record", "--pid", std::to_string(fixture.pid()),
                                              "--duration", "0.3", "-o", dir_.file("a.zst")}),
                            60s);
  // Let it go: stopped, then detached.
  ASSERT_EQ(ptrace(PTRACE_INTERRUPT, fixture.pid(), 0, 0), 0);
  int status = 0;
  ASSERT_EQ(waitpid(fixture.pid(), &status, __WALL), fixture.pid());
  ASSERT_EQ(ptrace(PTRACE_DETACH, fixture.pid(), 0, 0), 0);
  EXPECT_EQ(r.exit_code(), 0) << r.describe();
  EXPECT_NE(r.err.find("not attached in-process (pid " + std::to_string(fixture.pid()) + " is already traced by pid " +
                       std::to_string(getpid())),
            std::string::npos)
      << r.err;
  expect_uprobes_recorded(dir_.file("a.zst"), fixture);
}

// memtrack under a seccomp filter that refuses ptrace (a container's
// profile): said, and the uprobes record.
TEST_F(Attach, PtraceRefusedBySeccompLeftToTheUprobes) {
  Child fixture({FX_LIBC, "waitcount", "100"});
  ASSERT_TRUE(fixture.wait_for_stdout("ready ", 10s)) << fixture.finish(1s).describe();
  std::vector<std::string> argv = with_run_options(
      {MEMTRACK_BIN, "record", "--pid", std::to_string(fixture.pid()), "--duration", "0.3", "-o", dir_.file("a.zst")});
  argv.insert(argv.begin(), FX_NO_PTRACE);
  RunResult r = run_process(argv, 60s);
  EXPECT_EQ(r.exit_code(), 0) << r.describe();
  EXPECT_NE(r.err.find("not attached in-process (ptrace: Operation not permitted (memtrack runs under a seccomp filter))"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(process_state(fixture.pid()).substr(1), " tracer 0");
  expect_uprobes_recorded(dir_.file("a.zst"), fixture);
}

// A static executable has no loader to load the interposer: said, and the
// uprobes record its calls.
TEST_F(Attach, StaticExecutableLeftToTheUprobes) {
  Child fixture({FX_LIBC_STATIC, "waitcount", "100"});
  ASSERT_TRUE(fixture.wait_for_stdout("ready ", 10s)) << fixture.finish(1s).describe();
  Child memtrack(with_run_options({MEMTRACK_BIN, "record", "--pid", std::to_string(fixture.pid()), "-o", dir_.file("a.zst")}));
  ASSERT_TRUE(memtrack.wait_for_stderr("Ctrl-C to stop", 30s)) << memtrack.finish(1s).describe();
  ASSERT_EQ(kill(fixture.pid(), SIGUSR1), 0);
  RunResult fx = fixture.finish(30s);
  EXPECT_EQ(fx.exit_code(), 0) << fx.describe();
  RunResult r = memtrack.finish(30s);
  EXPECT_EQ(r.exit_code(), 0) << r.describe();
  EXPECT_NE(r.err.find("not attached in-process (statically linked: no dynamic loader"), std::string::npos) << r.err;
  Recording rec = read_recording(dir_.file("a.zst"));
  EXPECT_TRUE(clean_read(rec));
  BlockBalance b = balance_of(rec, fixture.pid());
  EXPECT_FALSE(b.interposed);
  EXPECT_GE(b.allocations, 100u);
}

}  // namespace
}  // namespace memtrack::testing
