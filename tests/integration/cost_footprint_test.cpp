// What recording costs: the probe floor `record` measures at start (stored
// in the trailer, shown by info and the report, and a warning when it is
// high) against an independent measurement, and the recorder's own peak
// RSS. Needs root or CAP_BPF+CAP_PERFMON; otherwise every test is reported
// as skipped, loudly.
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "recording.h"

namespace memtrack::testing {
namespace {

class CostFootprint : public ::testing::Test {
 protected:
  void SetUp() override { MEMTRACK_REQUIRE_BPF_PRIVILEGES(); }
  TempDir dir_;
};

std::string microseconds(uint64_t ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f \u00b5s", static_cast<double>(ns) / 1000);
  return text;
}

// fx_malloc_loop prints the median CPU ns of one malloc+free pair.
double pair_cpu_ns(const RunResult& run) {
  try {
    return std::stod(run.out);
  } catch (const std::exception&) {
    ADD_FAILURE() << "fx_malloc_loop printed no time: " << run.describe();
    return 0;
  }
}

// Guards the stored probe floor against what probes really cost: within 3x
// of the probes' cost in a malloc loop, each figure the least disturbed of
// several interleaved rounds (a loaded machine only adds time).
TEST_F(CostFootprint, ProbeFloorIsStoredAndAgreesWithTheEmptyProbesOfARecording) {
  // The independent measurement: a malloc+free loop's CPU time per pair
  // untraced and under the same probes doing nothing. A pair takes three
  // probe hits (malloc's entry and return, free's entry), the floor's call
  // two (entry and return): a pair costs about 1.5 floors.
  const std::vector<std::string> loop = {FX_MALLOC_LOOP, "20000", "0", "cpu"};
  // Rounds interleaved, so that load coming or going hits both sides; the
  // minimum of each: other tasks sharing the CPUs (caches, the other
  // hyperthread, preemption of the floor's timed calls) only add time.
  constexpr int kRounds = 5;
  double untraced_ns = 0, probed_ns = 0;
  uint64_t floor_ns = 0, syscall_ns = 0;
  for (int round = 0; round < kRounds; ++round) {
    RunResult untraced = run_process(loop, std::chrono::seconds(60));
    ASSERT_EQ(untraced.exit_code(), 0) << untraced.describe();
    Recorded probed = record_command(dir_, loop, std::chrono::seconds(120), {}, {"--empty-probes"});
    ASSERT_EQ(probed.run.exit_code(), 0) << probed.run.describe();
    ASSERT_TRUE(clean_read(probed.rec));
    const auto& counters = probed.rec.read.trailer->counters;
    ASSERT_TRUE(counters.contains("probe_floor_ns")) << "no probe_floor_ns in the trailer";
    ASSERT_TRUE(counters.contains("syscall_ns")) << "no syscall_ns in the trailer";
    auto least = [round](auto& figure, auto value) { figure = round == 0 ? value : std::min(figure, value); };
    least(untraced_ns, pair_cpu_ns(untraced));
    least(probed_ns, pair_cpu_ns(probed.run));
    least(floor_ns, counters.at("probe_floor_ns"));
    least(syscall_ns, counters.at("syscall_ns"));
  }

  double per_call_ns = (probed_ns - untraced_ns) / 1.5;
  std::string figures = "probe_floor_ns " + std::to_string(floor_ns) + ", syscall_ns " + std::to_string(syscall_ns) +
                        ", the loop's probes " + std::to_string(per_call_ns) + " ns a call (least of " +
                        std::to_string(kRounds) + " rounds)";
  std::printf("%s\n", figures.c_str());
  // Loose bounds: the probed instructions differ.
  EXPECT_GT(floor_ns, per_call_ns / 3) << figures;
  EXPECT_LT(floor_ns, per_call_ns * 3) << figures;
  // A probed call enters the kernel at least twice (the trap, the return).
  EXPECT_GT(syscall_ns, 0u) << figures;
  EXPECT_GT(floor_ns, syscall_ns) << figures;
}

TEST_F(CostFootprint, WarningShownWhenTheThresholdIsReachedAndFigureInInfoAndReport) {
  std::string artifact = dir_.file("a.zst");
  RunResult forced = run_process(
      {MEMTRACK_BIN, "record", "--uprobes", "--probe-cost-warning", "0", "-o", artifact, "--", "/bin/true"},
      std::chrono::seconds(60));
  ASSERT_EQ(forced.exit_code(), 0) << forced.describe();
  Recording rec = read_recording(artifact);
  ASSERT_TRUE(clean_read(rec));
  ASSERT_TRUE(rec.read.trailer->counters.contains("probe_floor_ns"));
  uint64_t floor_ns = rec.read.trailer->counters.at("probe_floor_ns");
  std::string cost = "each intercepted allocator call will cost about " + microseconds(floor_ns);
  EXPECT_NE(forced.err.find(cost), std::string::npos) << "expected \"" << cost << "\"\n" << forced.describe();
  EXPECT_NE(forced.err.find("x slower while recorded"), std::string::npos) << forced.describe();

  RunResult info = run_process({MEMTRACK_BIN, "info", artifact}, std::chrono::seconds(30));
  EXPECT_EQ(info.exit_code(), 0) << info.describe();
  EXPECT_NE(info.out.find("\nprobe_floor_ns: " + std::to_string(floor_ns) + "\n"), std::string::npos) << info.out;
  RunResult report = run_process({MEMTRACK_BIN, "report", artifact}, std::chrono::seconds(60));
  EXPECT_EQ(report.exit_code(), 0) << report.describe();
  EXPECT_NE(report.out.find(microseconds(floor_ns) + " per allocator call recorded by uprobes"), std::string::npos)
      << report.out;

  RunResult below = run_process(
      {MEMTRACK_BIN, "record", "--uprobes", "--probe-cost-warning", "1000000000", "-o", artifact, "--", "/bin/true"},
      std::chrono::seconds(60));
  ASSERT_EQ(below.exit_code(), 0) << below.describe();
  EXPECT_EQ(below.err.find("will cost about"), std::string::npos) << below.describe();

  // On the fast path the interposed processes do not pay it: no warning.
  RunResult fast = run_process({MEMTRACK_BIN, "record", "--probe-cost-warning", "0", "-o", artifact, "--", "/bin/true"},
                               std::chrono::seconds(60));
  ASSERT_EQ(fast.exit_code(), 0) << fast.describe();
  EXPECT_EQ(fast.err.find("will cost about"), std::string::npos) << fast.describe();
}

// Loading the BPF programs was most of a recording's fixed cost: without
// stacks the verifier walked the stack walker anyway (434,504 instructions,
// 0.4-0.9 s of CPU on this machine's VM), reached from the allocation
// return through a thread-state field it cannot know is 0. The stack mode is
// a constant of the loaded programs, so the walker is pruned. The figure
// depends on the kernel's verifier and on the mechanisms (kernel matrix:
// 11,146 on 6.18, 32,962 on 6.12, 42,009 on 6.1 with classic uprobes): the
// bound sits between those and the regression (also checked there:
// scripts/kernel-matrix-compare.py).
TEST_F(CostFootprint, WithoutStacksTheVerifierDoesNotWalkTheStackWalker) {
  std::string artifact = dir_.file("a.zst");
  for (std::vector<std::string> flags : {std::vector<std::string>{"--uprobes"}, std::vector<std::string>{}}) {
    std::vector<std::string> argv = {MEMTRACK_BIN, "record", "-q", "--no-stacks"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"-o", artifact, "--", "/bin/true"});
    RunResult run = run_process(argv, std::chrono::seconds(60));
    ASSERT_EQ(run.exit_code(), 0) << run.describe();
    Recording rec = read_recording(artifact);
    ASSERT_TRUE(clean_read(rec));
    const auto& counters = rec.read.trailer->counters;
    ASSERT_TRUE(counters.contains("bpf_verified_insns")) << "no bpf_verified_insns in the trailer";
    EXPECT_GT(counters.at("bpf_verified_insns"), 0u);
    EXPECT_LT(counters.at("bpf_verified_insns"), 600000u) << "flags: " << ::testing::PrintToString(flags);
  }
}

// With stacks the verifier walked the stack walker's module search again with
// every state of each walk calling it (976,068 instructions, ~0.55 s of the
// recording's system CPU here); a global function is checked once. Kernel
// matrix: 162,198 on 6.18, 235,982 on 6.12, 54,830 on 6.1; the bound sits
// between those and the regression.
TEST_F(CostFootprint, WithStacksTheVerifierChecksTheModuleSearchOnce) {
  std::string artifact = dir_.file("a.zst");
  for (std::vector<std::string> flags : {std::vector<std::string>{"--uprobes"}, std::vector<std::string>{}}) {
    std::vector<std::string> argv = {MEMTRACK_BIN, "record", "-q", "--stacks"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"-o", artifact, "--", "/bin/true"});
    RunResult run = run_process(argv, std::chrono::seconds(60));
    ASSERT_EQ(run.exit_code(), 0) << run.describe();
    Recording rec = read_recording(artifact);
    ASSERT_TRUE(clean_read(rec));
    const auto& counters = rec.read.trailer->counters;
    ASSERT_TRUE(counters.contains("bpf_verified_insns")) << "no bpf_verified_insns in the trailer";
    EXPECT_LT(counters.at("bpf_verified_insns"), 600000u) << "flags: " << ::testing::PrintToString(flags);
  }
}

// Runs argv with its output discarded; returns its peak RSS in KiB (wait4's
// ru_maxrss: the process's VmHWM, or a waited-for descendant's if larger).
// memtrack's recorder may still release the kernel's probes after memtrack
// has exited: the process argv runs under is the subreaper of everything it
// starts and waits for all of it, so the recorder's peak counts too.
long peak_rss_kib(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int devnull = open("/dev/null", O_RDWR);
    for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) dup2(devnull, fd);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    pid_t command = fork();
    if (command == 0) {
      execv(args[0], args.data());
      _exit(127);
    }
    int status = 0;
    if (command < 0 || waitpid(command, &status, 0) != command) _exit(126);
    while (wait(nullptr) > 0 || errno == EINTR) {
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  setpgid(pid, pid);
  auto deadline = Clock::now() + timeout;
  int status = 0;
  rusage usage{};
  while (wait4(pid, &status, WNOHANG, &usage) != pid) {
    if (Clock::now() >= deadline) {
      kill(-pid, SIGKILL);
      kill(-pid, SIGCONT);
      wait4(pid, &status, 0, &usage);
      ADD_FAILURE() << argv[0] << " timed out";
      return -1;
    }
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "wait status " << status;
  return usage.ru_maxrss;
}

// The kernel's rings count twice in RSS (libbpf maps each ring's data twice
// so that a record may wrap), used or not: on the fast path 2 x (1 MiB of
// events + 2 MiB of process records) = 6 MiB. memtrack's code and libraries
// take ~12 MiB: 18 MiB measured without call paths. The bound leaves a third
// of headroom; the uprobe path's rings (8 MiB of events) would exceed it.
constexpr long kTinyProgramBoundKib = 26 * 1024;
// Call paths (the default) add the stack ring, twice 1 MiB on the fast path
// (twice 16 MiB with the uprobes), and the rule table the interposers share:
// 3.4 MiB more measured.
constexpr long kCallPathsExtraKib = 10 * 1024;

TEST_F(CostFootprint, PeakRssOfATinyProgramStaysSmall) {
  long without = peak_rss_kib(
      {MEMTRACK_BIN, "record", "-q", "--no-stacks", "-o", dir_.file("a.zst"), "--", "/bin/true"},
      std::chrono::seconds(60));
  EXPECT_GT(without, 0);
  EXPECT_LT(without, kTinyProgramBoundKib)
      << "memtrack record --no-stacks -- /bin/true peaked at " << without / 1024 << " MiB";
  long with = peak_rss_kib({MEMTRACK_BIN, "record", "-q", "-o", dir_.file("a.zst"), "--", "/bin/true"},
                           std::chrono::seconds(60));
  EXPECT_LT(with, without + kCallPathsExtraKib)
      << "memtrack record -- /bin/true peaked at " << with / 1024 << " MiB, " << without / 1024
      << " MiB without call paths";
}

// On top of the tiny program's (without call paths): the artifact writer with one worker, up to
// 3 frames of 65,536 events in flight (~4.7 MB each) and ~14 MB of packing
// and compression buffers (docs/benchmarks-history.md, encoder memory): 64 MiB
// measured for 1 M events. The pipeline's batches stay small as long as the
// writer keeps up.
constexpr long kAllocationHeavyBoundKib = 96 * 1024;

TEST_F(CostFootprint, PeakRssOfAnAllocationHeavyProgramIsBounded) {
  std::string artifact = dir_.file("a.zst");
  long kib = peak_rss_kib({MEMTRACK_BIN, "record", "-q", "--no-stacks", "--encode-workers", "1", "-o", artifact, "--",
                           FX_MALLOC_LOOP, "40000"},
                          std::chrono::seconds(150));
  Recording rec = read_recording(artifact);
  ASSERT_TRUE(clean_read(rec));
  EXPECT_TRUE(no_losses(rec));
  EXPECT_GE(rec.read.stats.events, 400000u) << "the loop's 200,000 malloc+free pairs";
  EXPECT_GT(kib, 0);
  EXPECT_LT(kib, kAllocationHeavyBoundKib) << "memtrack peaked at " << kib / 1024 << " MiB";
}

// The fast path's events come faster than the writer packs them (400,000 in
// ~0.1 s). Drained as fast as they came, they waited in the pipeline's queue
// (up to 64 MiB) and in the writer's frames in flight: 101-108 MiB against
// the uprobe path's 64. They now wait in the interposer's chunks (shared
// memory, already resident) and the program waits when its chunk is full.
TEST_F(CostFootprint, PeakRssOnTheFastPathIsNoMoreThanOnTheUprobePath) {
  auto peak = [&](std::vector<std::string> flags) {
    std::string artifact = dir_.file("a.zst");
    std::vector<std::string> argv = {MEMTRACK_BIN, "record", "-q", "--encode-workers", "1"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"-o", artifact, "--", FX_MALLOC_LOOP, "40000"});
    long kib = peak_rss_kib(argv, std::chrono::seconds(150));
    Recording rec = read_recording(artifact);
    EXPECT_TRUE(clean_read(rec));
    EXPECT_TRUE(no_losses(rec));
    EXPECT_GE(rec.read.stats.events, 400000u);
    if (flags.empty() && rec.read.trailer) {
      const auto& counters = rec.read.trailer->counters;
      EXPECT_GE(counters.contains("interposer_events") ? counters.at("interposer_events") : 0, 400000u)
          << "the loop was not interposed";
    }
    return kib;
  };
  long fast = peak({}), uprobes = peak({"--uprobes"});
  ASSERT_GT(fast, 0);
  ASSERT_GT(uprobes, 0);
  // The rest of the recorder is the same on both paths; 4 MiB is the
  // spread of either between runs here.
  EXPECT_LT(fast, uprobes + 4 * 1024) << "fast path " << fast / 1024 << " MiB, uprobe path " << uprobes / 1024
                                      << " MiB";
}

}  // namespace
}  // namespace memtrack::testing
