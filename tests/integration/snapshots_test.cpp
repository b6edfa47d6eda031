// Snapshots while recording (record/snapshots.h): SIGUSR1 to memtrack,
// --snapshot-every and --snapshot-when (heap, rss, a cgroup's memory limit)
// each write OUTPUT.snapshot-N.pb.gz, read here by `go tool pprof`: its
// samples are those of `memtrack report --at T` of the finished artifact, T
// being the moment memtrack printed, and hold the blocks fx_libc service is
// known to keep live. A snapshot is whole or absent when the recorder is
// SIGKILLed right after or during it; no trigger, no snapshot.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "format/artifact.h"
#include "go_pprof.h"
#include "recording.h"

namespace memtrack::testing {
namespace {

using namespace std::chrono_literals;

// "memtrack: snapshot N (WHY): the heap live at T s in FILE (S s)"
struct SnapshotLine {
  std::string why, at, file;
};

std::vector<SnapshotLine> snapshot_lines(const std::string& err) {
  static const std::regex line(R"(memtrack: snapshot \d+ \((.*)\): the heap live at ([0-9.]+) s in (\S+) \()");
  std::vector<SnapshotLine> lines;
  for (std::sregex_iterator it(err.begin(), err.end(), line), end; it != end; ++it)
    lines.push_back({(*it)[1].str(), (*it)[2].str(), (*it)[3].str()});
  return lines;
}

std::vector<std::string> files_in(const TempDir& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    if (entry.path().filename() != "gocache") names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

class Snapshots : public ::testing::Test {
 protected:
  void SetUp() override {
    MEMTRACK_REQUIRE_BPF_PRIVILEGES();
    go_ = go_binary();
    if (go_.empty()) {
      std::fputs("\n*** SKIPPED: `go` not found: snapshots were NOT checked with go tool pprof ***\n", stderr);
      GTEST_SKIP() << "`go` not found: snapshots were NOT checked with go tool pprof";
    }
  }

  // The samples of a profile with a non-zero live figure at its moment
  // (peak_space), each as `go tool pprof -traces` prints it: labels, value
  // and frames. Sorted: the files number their samples differently.
  std::vector<std::string> live_traces(const std::string& profile) {
    RunResult run = run_go_pprof(go_, dir_, {"-traces", "-sample_index=peak_space"}, profile);
    EXPECT_EQ(run.exit_code(), 0) << run.describe();
    std::vector<std::string> traces;
    const std::string separator = "-----------+-------------------------------------------------------\n";
    size_t start = run.out.find(separator);
    while (start != std::string::npos) {
      start += separator.size();
      size_t end = run.out.find(separator, start);
      std::string trace = run.out.substr(start, end == std::string::npos ? std::string::npos : end - start);
      // Label lines ("pid:  123", "command:  a b") first, then the value and the first frame.
      std::istringstream lines(trace);
      std::string line, value;
      while (std::getline(lines, line)) {
        std::istringstream words(line);
        words >> value;
        if (!value.ends_with(':')) break;
      }
      if (!value.empty() && value != "0") traces.push_back(trace);
      start = end;
    }
    std::sort(traces.begin(), traces.end());
    return traces;
  }

  // The snapshot holds what `report --at` of the finished artifact says was
  // live at its moment, call path by call path.
  void expect_report_at_moment(const std::string& artifact, const SnapshotLine& snapshot) {
    std::string at_moment = dir_.file("at-" + snapshot.at + ".pb.gz");
    RunResult report = run_process(
        {MEMTRACK_BIN, "report", artifact, "--at", snapshot.at, "--format", "pprof", "-o", at_moment}, 60s);
    ASSERT_EQ(report.exit_code(), 0) << report.describe();
    std::vector<std::string> snapshot_traces = live_traces(snapshot.file);
    EXPECT_FALSE(snapshot_traces.empty()) << snapshot.file << ": nothing live";
    EXPECT_EQ(snapshot_traces, live_traces(at_moment)) << snapshot.why << " at " << snapshot.at;
    std::filesystem::remove(at_moment);
  }

  // Whether a sample of the profile has exactly `blocks` blocks of `size`
  // bytes live at its moment (one call path of fx_libc service).
  bool holds_blocks(const std::string& profile, uint64_t blocks, uint64_t size) {
    RunResult run = run_go_pprof(go_, dir_, {"-raw"}, profile);
    EXPECT_EQ(run.exit_code(), 0) << run.describe();
    for (const auto& sample : raw_samples(run.out))
      if (sample.at("peak_objects/count") == blocks && sample.at("peak_space/bytes") == blocks * size) return true;
    return false;
  }

  // fx_libc service serves (SIGUSR1): frees its blocks of 48 bytes, keeps
  // as many of 80.
  void serve(pid_t service, Child& memtrack) {
    kill(service, SIGUSR1);
    EXPECT_TRUE(memtrack.wait_for_stdout("served ", 30s)) << memtrack.err();
  }
  // Serves, then leaves (SIGUSR2).
  void end_service(pid_t service, Child& memtrack) {
    serve(service, memtrack);
    kill(service, SIGUSR2);
  }

  // The service's pid once it is ready, and a moment later: a snapshot's
  // moment trails its request by the recorder's ordering margin (a poll
  // period), and the tests ask for the blocks made just before "ready".
  pid_t service_pid(Child& memtrack) {
    if (!memtrack.wait_for_stdout("ready ", 30s)) return 0;
    std::this_thread::sleep_for(300ms);
    return std::stoi(memtrack.out().substr(memtrack.out().find("ready ") + 6));
  }

  TempDir dir_;
  std::string go_;
};

constexpr unsigned long kBlocks = 20000;  // fx_libc service's blocks of 48 bytes

TEST_F(Snapshots, SignalWritesTheHeapLiveAtItsMoment) {
  std::string artifact = dir_.file("a.zst");
  Child memtrack({MEMTRACK_BIN, "record", "-q", "-o", artifact, "--", FX_LIBC, "service", std::to_string(kBlocks)});
  pid_t service = service_pid(memtrack);
  ASSERT_GT(service, 0) << memtrack.finish(5s).describe();
  kill(memtrack.pid(), SIGUSR1);
  ASSERT_TRUE(memtrack.wait_for_stderr("snapshot 1 ", 60s)) << memtrack.err();
  // The command never sees the signal: it would have ended the service.
  end_service(service, memtrack);
  RunResult run = memtrack.finish(60s);
  ASSERT_EQ(run.exit_code(), 0) << run.describe();

  std::vector<SnapshotLine> snapshots = snapshot_lines(run.err);
  ASSERT_EQ(snapshots.size(), 1u) << run.err;
  EXPECT_EQ(snapshots[0].why, "SIGUSR1");
  EXPECT_EQ(snapshots[0].file, dir_.file("a.snapshot-1.pb.gz"));
  EXPECT_TRUE(holds_blocks(snapshots[0].file, kBlocks, 48)) << "the service's blocks of 48 bytes";
  EXPECT_FALSE(holds_blocks(snapshots[0].file, kBlocks, 80)) << "blocks allocated after the snapshot";
  expect_report_at_moment(artifact, snapshots[0]);
  EXPECT_EQ(files_in(dir_), (std::vector<std::string>{"a.snapshot-1.pb.gz", "a.zst"}));

  Recording rec = read_recording(artifact);
  ASSERT_TRUE(rec.read.trailer);
  EXPECT_TRUE(no_losses(rec));
  EXPECT_EQ(rec.read.trailer->counters["snapshots_written"], 1u);
  EXPECT_EQ(rec.read.trailer->counters["snapshots_on_signal"], 1u);
}

// With --hold ptrace the recorder's tracer reaps every child it has
// (waitpid(-1)), the snapshot's report too: the profile then stands for
// itself, written whole.
TEST_F(Snapshots, UnderAPtraceHold) {
  std::string artifact = dir_.file("p.zst");
  Child memtrack({MEMTRACK_BIN, "record", "-q", "--hold", "ptrace", "-o", artifact, "--", FX_LIBC, "service",
                  std::to_string(kBlocks)});
  pid_t service = service_pid(memtrack);
  ASSERT_GT(service, 0) << memtrack.finish(5s).describe();
  for (int snapshot = 1; snapshot <= 3; ++snapshot) {
    kill(memtrack.pid(), SIGUSR1);
    ASSERT_TRUE(memtrack.wait_for_stderr("snapshot " + std::to_string(snapshot) + " ", 60s)) << memtrack.err();
  }
  end_service(service, memtrack);
  RunResult run = memtrack.finish(60s);
  ASSERT_EQ(run.exit_code(), 0) << run.describe();
  std::vector<SnapshotLine> snapshots = snapshot_lines(run.err);
  ASSERT_EQ(snapshots.size(), 3u) << run.err;
  for (const SnapshotLine& snapshot : snapshots) EXPECT_TRUE(holds_blocks(snapshot.file, kBlocks, 48)) << snapshot.file;
  expect_report_at_moment(artifact, snapshots[2]);
}

// --snapshot-every writes one an interval after the last; heap>=SIZE one when the heap
// reaches it, none more while it stays, another after it fell below and grew
// past it again.
TEST_F(Snapshots, IntervalAndHeapConditionWriteSnapshots) {
  std::string artifact = dir_.file("b.zst");
  const uint64_t threshold = 1 << 20;  // the service keeps 20,000 x 48 + 20,000 x 8 bytes: 1.07 MiB
  Child memtrack({MEMTRACK_BIN, "record", "-q", "-o", artifact, "--snapshot-every", "0.5", "--snapshot-when",
                  "heap>=1MiB", "--", FX_LIBC, "service", std::to_string(kBlocks)});
  pid_t service = service_pid(memtrack);
  ASSERT_GT(service, 0) << memtrack.finish(5s).describe();
  const std::string heap_snapshot = "(heap>=1MiB: heap ";
  ASSERT_TRUE(memtrack.wait_for_stderr(heap_snapshot, 60s)) << memtrack.err();
  // Standing still above the threshold: two more intervals, no other heap snapshot.
  const size_t written = snapshot_lines(memtrack.err()).size();
  ASSERT_TRUE(memtrack.wait_for_stderr("snapshot " + std::to_string(written + 2) + " ", 60s)) << memtrack.err();
  EXPECT_FALSE(memtrack.wait_for_stderr_times(heap_snapshot, 2, 0ms)) << memtrack.err();
  // It frees the 48-byte blocks (below the threshold) and allocates 80-byte
  // ones (above it, and 10% above the first snapshot's figure).
  serve(service, memtrack);
  EXPECT_TRUE(memtrack.wait_for_stderr_times(heap_snapshot, 2, 60s)) << memtrack.err();
  kill(service, SIGUSR2);
  RunResult run = memtrack.finish(60s);
  ASSERT_EQ(run.exit_code(), 0) << run.describe();

  std::vector<SnapshotLine> snapshots = snapshot_lines(run.err);
  size_t intervals = 0, heap = 0;
  for (const SnapshotLine& snapshot : snapshots) {
    SCOPED_TRACE(snapshot.why + " at " + snapshot.at);
    if (snapshot.why.starts_with("every 0.5 s") && ++intervals == 1) expect_report_at_moment(artifact, snapshot);
    if (snapshot.why.starts_with("heap>=1MiB: heap ")) {
      ++heap;
      RunResult live = run_go_pprof(go_, dir_, {"-raw"}, snapshot.file);
      EXPECT_GE(raw_totals(live.out)["peak_space/bytes"], threshold) << "the heap reached the threshold";
      expect_report_at_moment(artifact, snapshot);
    }
  }
  EXPECT_GE(intervals, 2u) << run.err;
  EXPECT_GE(heap, 2u) << run.err;
  EXPECT_EQ(intervals + heap, snapshots.size()) << run.err;
  Recording rec = read_recording(artifact);
  ASSERT_TRUE(rec.read.trailer);
  EXPECT_TRUE(no_losses(rec));
  EXPECT_EQ(rec.read.trailer->counters["snapshots_on_interval"], intervals);
  EXPECT_EQ(rec.read.trailer->counters["snapshots_on_condition"], heap);
}

// The service's RSS starts at ~4 MiB; 200,000 blocks of 48 bytes take 12 MiB more.
TEST_F(Snapshots, RssConditionFires) {
  std::string artifact = dir_.file("c.zst");
  Child memtrack({MEMTRACK_BIN, "record", "-q", "-o", artifact, "--snapshot-when", "rss>=12MiB", "--", FX_LIBC,
                  "service", std::to_string(10 * kBlocks)});
  pid_t service = service_pid(memtrack);
  ASSERT_GT(service, 0) << memtrack.finish(5s).describe();
  ASSERT_TRUE(memtrack.wait_for_stderr("snapshot 1 (rss>=12MiB: rss ", 60s)) << memtrack.err();
  end_service(service, memtrack);
  RunResult run = memtrack.finish(60s);
  ASSERT_EQ(run.exit_code(), 0) << run.describe();
  std::vector<SnapshotLine> snapshots = snapshot_lines(run.err);
  ASSERT_FALSE(snapshots.empty());
  expect_report_at_moment(artifact, snapshots[0]);
}

// record --aggregate keeps no events to pick a moment from: a snapshot is
// the report of a checkpoint taken for it (what is live then, and each call
// path's peak so far), and the heap condition watches the aggregator's live
// bytes. The checkpoint goes once the artifact is complete.
TEST_F(Snapshots, AnAggregatedRecordingTakesThemFromACheckpoint) {
  std::string artifact = dir_.file("g.zst");
  Child memtrack({MEMTRACK_BIN, "record", "-q", "--aggregate", "--checkpoint-every", "0", "--snapshot-when",
                  "heap>=" + std::to_string(kBlocks * 48) + "B", "-o", artifact, "--", FX_LIBC, "service",
                  std::to_string(kBlocks)});
  pid_t service = service_pid(memtrack);
  ASSERT_GT(service, 0) << memtrack.finish(5s).describe();
  ASSERT_TRUE(memtrack.wait_for_stderr("snapshot 1 ", 60s)) << memtrack.err();
  kill(memtrack.pid(), SIGUSR1);
  ASSERT_TRUE(memtrack.wait_for_stderr("snapshot 2 ", 60s)) << memtrack.err();
  end_service(service, memtrack);
  RunResult run = memtrack.finish(60s);
  EXPECT_EQ(run.exit_code(), 0) << run.describe();
  EXPECT_EQ(run.err.find("failed"), std::string::npos) << run.describe();
  for (const char* snapshot : {"g.snapshot-1.pb.gz", "g.snapshot-2.pb.gz"})
    EXPECT_TRUE(holds_blocks(dir_.file(snapshot), kBlocks, 48)) << snapshot << ": the service's blocks of 48 bytes";
  EXPECT_FALSE(std::filesystem::exists(checkpoint_path(artifact)));
}

// A snapshot is linked under its name only once complete: SIGKILL to the
// recorder right after one leaves it readable; during one, it leaves no file.
TEST_F(Snapshots, SnapshotSurvivesTheRecorderKilled) {
  std::string artifact = dir_.file("d.zst");
  Child memtrack({MEMTRACK_BIN, "record", "-q", "-o", artifact, "--", FX_LIBC, "service", std::to_string(kBlocks)});
  pid_t service = service_pid(memtrack);
  ASSERT_GT(service, 0) << memtrack.finish(5s).describe();
  pid_t recorder = recorder_of(memtrack.pid());
  ASSERT_GT(recorder, 0);
  kill(memtrack.pid(), SIGUSR1);
  ASSERT_TRUE(memtrack.wait_for_stderr("snapshot 1 ", 60s)) << memtrack.err();
  kill(memtrack.pid(), SIGUSR1);
  std::this_thread::sleep_for(20ms);  // snapshot 2 under way
  kill(recorder, SIGKILL);
  ASSERT_TRUE(memtrack.wait_for_stderr("was killed by signal 9", 30s)) << memtrack.err();
  end_service(service, memtrack);
  RunResult run = memtrack.finish(60s);
  EXPECT_EQ(run.exit_code(), 0) << run.describe();

  std::string first = dir_.file("d.snapshot-1.pb.gz");
  EXPECT_TRUE(holds_blocks(first, kBlocks, 48)) << "the service's blocks of 48 bytes";
  // The second is there whole (it was finished in 20 ms) or not at all.
  std::string second = dir_.file("d.snapshot-2.pb.gz");
  std::vector<std::string> expected = {"d.snapshot-1.pb.gz", "d.zst"};
  if (std::filesystem::exists(second)) {
    EXPECT_TRUE(holds_blocks(second, kBlocks, 48)) << "the second snapshot, complete";
    expected.insert(expected.begin() + 1, "d.snapshot-2.pb.gz");
  }
  EXPECT_EQ(files_in(dir_), expected) << "no partial snapshot left";
}

// Where the memory controller is mounted: cgroup v2's hierarchy when its root
// lists it, else v1's memory hierarchy; empty when there is none.
struct MemoryHierarchy {
  std::string root;
  bool v2 = false;
};
MemoryHierarchy memory_hierarchy() {
  MemoryHierarchy v1, v2;
  std::ifstream mounts("/proc/self/mounts");
  for (std::string device, dir, type, options, rest; mounts >> device >> dir >> type >> options && std::getline(mounts, rest);) {
    if (type == "cgroup2") {
      std::string controllers;
      std::getline(std::ifstream(dir + "/cgroup.controllers"), controllers);
      if (controllers.find("memory") != std::string::npos) v2 = {dir, true};
    }
    if (type == "cgroup" && ("," + options + ",").find(",memory,") != std::string::npos) v1 = {dir, false};
  }
  return v2.root.empty() ? v1 : v2;
}

// In a cgroup with a memory limit (v2's memory.max, or v1's
// memory.limit_in_bytes where v2 has no memory controller, as on this
// project's VM), a snapshot when the cgroup uses a share of it, before the
// limit: attached with --pid to a service the test put there.
TEST_F(Snapshots, CgroupConditionFiresBeforeTheLimit) {
  const MemoryHierarchy memory = memory_hierarchy();
  const std::string cgroup = memory.root + "/memtrack-snapshots-test-" + std::to_string(getpid());
  if (memory.root.empty() || mkdir(cgroup.c_str(), 0755) != 0) {
    std::fputs("\n*** SKIPPED: no writable cgroup with the memory controller: cgroup>=N% NOT tested ***\n", stderr);
    GTEST_SKIP() << "no writable cgroup with the memory controller";
  }
  std::fprintf(stderr, "cgroup %s (%s)\n", cgroup.c_str(), memory.v2 ? "v2" : "v1");
  struct RemoveCgroup {
    std::string path;
    ~RemoveCgroup() {
      for (int attempt = 0; attempt < 100 && rmdir(path.c_str()) != 0; ++attempt) std::this_thread::sleep_for(50ms);
    }
  } remove_cgroup{cgroup};
  std::ofstream(cgroup + (memory.v2 ? "/memory.max" : "/memory.limit_in_bytes")) << (128 << 20) << "\n";
  // A service of ~10 MiB that, asked, takes 64 MiB more (a bytearray: zeroed,
  // so resident): past 40% of 128 MiB (51.2 MiB), below the limit.
  const std::string service_code =
      "import os, signal\n"
      "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGUSR2})\n"
      "print('ready', os.getpid(), flush=True)\n"
      "signal.sigwait({signal.SIGUSR1})\n"
      "big = bytearray(64 << 20)\n"
      "print('served', flush=True)\n"
      "signal.sigwait({signal.SIGUSR2})\n";
  Child service({"/bin/sh", "-c", "echo $$ > " + cgroup + "/cgroup.procs && exec /usr/bin/python3 -c \"$0\"", service_code});
  ASSERT_TRUE(service.wait_for_stdout("ready ", 30s)) << service.finish(5s).describe();
  std::string artifact = dir_.file("e.zst");
  Child memtrack({MEMTRACK_BIN, "record", "--pid", std::to_string(service.pid()), "-o", artifact,
                  "--snapshot-when", "cgroup>=40%"});
  ASSERT_TRUE(memtrack.wait_for_stderr("Ctrl-C to stop", 30s)) << memtrack.finish(5s).describe();
  EXPECT_NE(memtrack.err().find(cgroup + " uses 51.20 MiB of its memory limit 128.00 MiB"), std::string::npos)
      << memtrack.err();
  std::this_thread::sleep_for(500ms);
  EXPECT_TRUE(snapshot_lines(memtrack.err()).empty()) << "below 40% before serving: " << memtrack.err();
  kill(service.pid(), SIGUSR1);
  EXPECT_TRUE(service.wait_for_stdout("served", 60s));
  EXPECT_TRUE(memtrack.wait_for_stderr("snapshot 1 (cgroup>=40%: cgroup memory ", 60s)) << memtrack.err();
  kill(memtrack.pid(), SIGINT);
  RunResult run = memtrack.finish(60s);
  kill(service.pid(), SIGUSR2);
  RunResult served = service.finish(30s);
  EXPECT_EQ(served.exit_code(), 0) << served.describe() << "\n(the OOM killer would have killed it)";
  ASSERT_EQ(run.exit_code(), 0) << run.describe();
  std::vector<SnapshotLine> snapshots = snapshot_lines(run.err);
  ASSERT_FALSE(snapshots.empty()) << run.err;
  RunResult live = run_go_pprof(go_, dir_, {"-raw"}, snapshots[0].file);
  bool holds_the_bytearray = false;
  for (const auto& sample : raw_samples(live.out))
    holds_the_bytearray |= sample.at("peak_space/bytes") >= (64u << 20) && sample.at("peak_objects/count") == 1;
  EXPECT_TRUE(holds_the_bytearray) << live.out.substr(0, 4000);
  expect_report_at_moment(artifact, snapshots[0]);
}

TEST_F(Snapshots, NoTriggerNoSnapshot) {
  std::string artifact = dir_.file("f.zst");
  RunResult run = run_process({MEMTRACK_BIN, "record", "-o", artifact, "--", FX_LIBC, "count", "1000"}, 60s);
  ASSERT_EQ(run.exit_code(), 0) << run.describe();
  EXPECT_TRUE(snapshot_lines(run.err).empty()) << run.err;
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"f.zst"});
  Recording rec = read_recording(artifact);
  ASSERT_TRUE(rec.read.trailer);
  EXPECT_EQ(rec.read.trailer->counters["snapshots_written"], 0u);
}

TEST_F(Snapshots, MalformedConditionsAreRefused) {
  for (const char* bad : {"heap>1MiB", "heap>=1", "memory>=1MiB", "cgroup>=120%", "cgroup>=1GiB", "rss>=-1MiB"}) {
    RunResult run = run_process({MEMTRACK_BIN, "record", "--snapshot-when", bad, "--", "/bin/true"}, 30s);
    EXPECT_EQ(run.exit_code(), 125) << bad << "\n" << run.describe();
    EXPECT_NE(run.err.find("--snapshot-when " + std::string(bad)), std::string::npos) << run.err;
  }
  RunResult records = run_process(
      {MEMTRACK_BIN, "record", "--records-layout", "--snapshot-when", "heap>=1MiB", "--", "/bin/true"}, 30s);
  EXPECT_EQ(records.exit_code(), 125) << records.describe();
}

}  // namespace
}  // namespace memtrack::testing
