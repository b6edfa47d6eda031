// `record --hold ptrace` (docs/RELIABILITY.md, "Holding tasks"): the pauses
// memtrack makes are invisible to the command's own processes — a parent
// waiting with WUNTRACED sees none, a job-control shell's `wait` waits for its
// child — while a stop the user sends still stops, and a killed recorder
// leaves no task stopped. `--hold signal` (SIGSTOP) is the control: its stops
// are seen.
#include <sys/wait.h>

#include <random>

#include "integration/recording.h"
#include "util/proc_text.h"

using namespace memtrack;
using namespace memtrack::testing;

namespace {

char state_of(pid_t pid) {
  std::string text = read_proc_text("/proc/" + std::to_string(pid) + "/stat").value_or("");
  size_t close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() ? text[close + 2] : '?';
}

// Run as the recorded command when MEMTRACK_TEST_WAITER is set (before
// gtest's main), as a parent that waits for its children with WUNTRACED and
// prints "stops N" (the stops it was told of), then exits 0.
//   children N  N children in turn, each `fx_libc dlopen fakealloc` (a fork,
//               an exec, libraries and a dlopen: each a memtrack pause)
//   user-stop   one child `sleep 1`, which this parent stops with SIGSTOP as
//               soon as it sleeps, for 1.5 s; also prints "ran-while-stopped"
//               if it exited meanwhile
int waiter_main(const std::string& mode) {
  auto spawn = [](std::vector<const char*> argv) {
    pid_t child = fork();
    if (child == 0) {
      int null = open("/dev/null", O_WRONLY);
      dup2(null, STDOUT_FILENO);
      argv.push_back(nullptr);
      execv(argv[0], const_cast<char**>(argv.data()));
      _exit(127);
    }
    return child;
  };
  // Waits for `child` to exit; counts the stops reported meanwhile.
  auto wait_counting = [](pid_t child, int* stops, bool stop_once) {
    for (;;) {
      int status;
      pid_t r = waitpid(child, &status, WUNTRACED);
      if (r < 0 && errno == EINTR) continue;
      if (r == child && WIFSTOPPED(status)) {
        ++*stops;
        if (stop_once) return true;
        continue;
      }
      return r == child && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
  };
  int stops = 0;
  bool ok = true;
  if (mode.rfind("children ", 0) == 0) {
    for (int i = 0, n = std::atoi(mode.c_str() + 9); i < n; ++i)
      ok &= wait_counting(spawn({FX_LIBC, "dlopen", FX_FAKEALLOC}), &stops, false);
  } else if (mode == "user-stop") {
    pid_t child = spawn({"/bin/sleep", "1"});
    // Stopped once it sleeps (exec'd, past memtrack's hold), not after a
    // fixed 300 ms that a loaded machine can stretch past its second.
    auto sleeping = [child] {
      return read_proc_text("/proc/" + std::to_string(child) + "/comm").value_or("") == "sleep\n" &&
             state_of(child) == 'S';
    };
    for (auto until = std::chrono::steady_clock::now() + 30s; !sleeping() && std::chrono::steady_clock::now() < until;)
      std::this_thread::sleep_for(1ms);
    kill(child, SIGSTOP);
    ok = wait_counting(child, &stops, true);
    std::this_thread::sleep_for(1500ms);
    int status;
    if (waitpid(child, &status, WNOHANG) != 0) std::printf("ran-while-stopped\n");
    kill(child, SIGCONT);
    ok &= wait_counting(child, &stops, false);
  }
  std::printf("stops %d%s\n", stops, ok ? "" : " (a child failed)");
  std::fflush(stdout);
  _exit(ok ? 0 : 1);
}
const bool g_ran_as_waiter = std::getenv("MEMTRACK_TEST_WAITER") && waiter_main(std::getenv("MEMTRACK_TEST_WAITER"));

std::string self_path() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

std::optional<int> stops_printed(const std::string& out) {
  size_t at = out.find("stops ");
  if (at == std::string::npos) return std::nullopt;
  return std::atoi(out.c_str() + at + 6);
}

class Hold : public ::testing::Test {
 protected:
  void SetUp() override { MEMTRACK_REQUIRE_BPF_PRIVILEGES(); }

  // Records the waiter in `mode` with `--hold hold`.
  RunResult record_waiter(const std::string& hold, const std::string& mode, const std::string& artifact) {
    SpawnOptions waiter;
    waiter.env = {{"MEMTRACK_TEST_WAITER", mode}};
    return run_process({MEMTRACK_BIN, "record", "--hold", hold, "-o", artifact, "--", self_path()}, 120s, waiter);
  }
  TempDir dir_;
};

TEST_F(Hold, WuntracedParentSeesNoStopOfPtraceHolds) {
  RunResult r = record_waiter("ptrace", "children 10", dir_.file("p.zst"));
  ASSERT_EQ(r.exit_code(), 0) << r.describe();
  EXPECT_EQ(stops_printed(r.out), 0) << r.describe();
  EXPECT_NE(r.err.find("tasks held by ptrace"), std::string::npos) << r.describe();
  Recording rec = read_recording(dir_.file("p.zst"));
  ASSERT_TRUE(clean_read(rec));
  EXPECT_TRUE(no_losses(rec));
  EXPECT_GT(rec.read.trailer->counters["ptrace_holds"], 10u);  // at least one per child
  size_t children_recorded = 0;
  for (const Event& e : rec.events)
    if (e.type == EventType::Exec && e.image && e.image->path == FX_LIBC) ++children_recorded;
  EXPECT_EQ(children_recorded, 10u);
}

// The control: the same program sees memtrack's SIGSTOPs (the issue).
TEST_F(Hold, WuntracedParentSeesSignalHolds) {
  RunResult r = record_waiter("signal", "children 10", dir_.file("s.zst"));
  ASSERT_EQ(r.exit_code(), 0) << r.describe();
  EXPECT_GT(stops_printed(r.out).value_or(0), 0) << r.describe();
  EXPECT_NE(r.err.find("tasks held by SIGSTOP"), std::string::npos) << r.describe();
}

// Job control of the command still works: a user's SIGSTOP stops the child
// (its parent is told, once) until SIGCONT.
TEST_F(Hold, UserStopStillStopsUnderPtraceHold) {
  RunResult r = record_waiter("ptrace", "user-stop", dir_.file("u.zst"));
  ASSERT_EQ(r.exit_code(), 0) << r.describe();
  EXPECT_EQ(stops_printed(r.out), 1) << r.describe();
  EXPECT_EQ(r.out.find("ran-while-stopped"), std::string::npos) << r.describe();
}

// A job-control shell (bash -m, on a terminal: script(1) gives it one) runs a
// child in the background and waits for it. With SIGSTOP holds its `wait`
// returned early ("job 1 stopped"), the shell exited and the child ran on
// unrecorded.
TEST_F(Hold, JobControlShellWaitsForItsChild) {
  if (access("/usr/bin/script", X_OK) != 0 || access("/bin/bash", X_OK) != 0)
    GTEST_SKIP() << "*** SKIPPED: needs /usr/bin/script and /bin/bash ***";
  std::string script = dir_.file("job.sh");
  {
    std::ofstream out(script);
    out << "sh -c 'for i in 1 2 3 4 5 6; do " << FX_LIBC << " dlopen " << FX_FAKEALLOC
        << " > /dev/null; done; echo child-done' &\nwait\necho \"wait=$?\"\n";
  }
  std::string artifact = dir_.file("j.zst");
  std::string command = std::string(MEMTRACK_BIN) + " record -q --hold ptrace -o " + artifact + " -- /bin/bash -m " + script;
  RunResult r = run_process({"/usr/bin/script", "-qec", command, "/dev/null"}, 120s);
  ASSERT_EQ(r.exit_code(), 0) << r.describe();
  EXPECT_EQ(r.out.find("stopped"), std::string::npos) << r.describe();
  size_t done = r.out.find("child-done"), waited = r.out.find("wait=0");
  EXPECT_NE(done, std::string::npos) << r.describe();
  EXPECT_NE(waited, std::string::npos) << r.describe();
  EXPECT_LT(done, waited) << r.describe();
  Recording rec = read_recording(artifact);
  ASSERT_TRUE(clean_read(rec));
  EXPECT_TRUE(no_losses(rec));
  size_t children_recorded = 0;
  for (const Event& e : rec.events)
    if (e.type == EventType::Exec && e.image && e.image->path == FX_LIBC) ++children_recorded;
  EXPECT_EQ(children_recorded, 6u);
}

// Where ptrace cannot hold (here: --pid, processes memtrack did not start),
// memtrack says so and holds by SIGSTOP.
TEST_F(Hold, PtraceHoldFallsBackToSignalsWithAWarning) {
  Child sleeper({"/bin/sleep", "600"});  // killed below: alive however slowly memtrack starts
  RunResult r = run_process({MEMTRACK_BIN, "record", "--hold", "ptrace", "--pid", std::to_string(sleeper.pid()),
                             "--duration", "0.5", "-o", dir_.file("f.zst")},
                            60s);
  kill(sleeper.pid(), SIGKILL);
  sleeper.finish(5s);
  EXPECT_EQ(r.exit_code(), 0) << r.describe();
  EXPECT_NE(r.err.find("--hold ptrace: --pid attaches to processes memtrack did not start; tasks are held by SIGSTOP"),
            std::string::npos)
      << r.describe();
  EXPECT_NE(r.err.find("tasks held by SIGSTOP"), std::string::npos) << r.describe();
}

// ------------------------------------------------------- recorder killed

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> found;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(parent) + "/task", ec)) {
    std::ifstream list(task.path() / "children");
    for (pid_t pid; list >> pid;) found.push_back(pid);
  }
  return found;
}

// Every thread below `root` that is in a ptrace stop ('t').
bool tree_has_traced_stop(pid_t root) {
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(p) + "/task", ec))
      if (p != root && state_of(std::atoi(task.path().filename().c_str())) == 't') return true;
    for (pid_t c : children_of(p)) todo.push_back(c);
  }
  return false;
}

// The recorder is killed while a task is held: the tracer's death detaches
// every task, none stays stopped, the command runs to its end and memtrack
// exits with its status. A task held in a ptrace stop just runs on; only a
// SIGSTOP the dying tracer had not caught yet becomes a job-control stop
// (the parent then sees it once, and the guardian resumes it): counted.
TEST_F(Hold, KilledRecorderLeavesNoTaskStopped) {
  constexpr int kRuns = 4;
  int during_hold = 0, seen_by_parent = 0;
  std::mt19937 random(std::random_device{}());
  for (int run = 0; run < kRuns && !HasFailure(); ++run) {
    SpawnOptions waiter;
    waiter.env = {{"MEMTRACK_TEST_WAITER", "children 30"}};
    Child memtrack({MEMTRACK_BIN, "record", "-q", "--hold", "ptrace", "-o", dir_.file("k.zst"), "--", self_path()},
                   waiter);
    int skip = std::uniform_int_distribution<int>(2, 20)(random);
    pid_t recorder = 0;
    bool killed = false, was_held = false;
    for (auto deadline = Clock::now() + 60s; Clock::now() < deadline && !memtrack.exited_now();) {
      for (pid_t child : children_of(memtrack.pid()))
        if (getpgid(child) == child) recorder = child;
      bool held = recorder && tree_has_traced_stop(recorder);
      if (held && !was_held && skip-- == 0) {
        kill(recorder, SIGKILL);
        killed = true;
        break;
      }
      was_held = held;
      std::this_thread::sleep_for(200us);
    }
    RunResult r = memtrack.finish(60s);
    std::string where = "run " + std::to_string(run);
    ASSERT_FALSE(r.timed_out) << where << ": a task stayed stopped; " << r.describe();
    EXPECT_EQ(r.exit_code(), 0) << where << ": " << r.describe();
    ASSERT_TRUE(stops_printed(r.out)) << where << ": " << r.describe();
    seen_by_parent += *stops_printed(r.out) > 0;
    if (killed) {
      ++during_hold;
      EXPECT_NE(r.err.find("was killed by signal 9"), std::string::npos) << where << ": " << r.describe();
    }
  }
  std::cerr << "[ info     ] " << during_hold << " of " << kRuns << " kills while a task was held; the parent saw a stop in "
            << seen_by_parent << "\n";
  EXPECT_GT(during_hold, 0) << "no kill happened while a task was held";
}

}  // namespace
