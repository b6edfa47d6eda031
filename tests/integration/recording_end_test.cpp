// A recording that ends before its processes (docs/REPORT.md, "A recording
// that ends before the process"), on real recordings: attached to a running
// service with --pid and stopped while it runs on, and a command that exits
// leaving a process behind. Blocks still live then are "live at end", not
// leaks; frees of blocks allocated before the attach are counted apart; the
// report says what it cannot know, and check's budgets on leaks do not fire
// on live blocks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "format/artifact.h"

#include "recording.h"

namespace memtrack::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class RecordingEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_bpf_privileges()) GTEST_SKIP() << "needs root or CAP_BPF+CAP_PERFMON";
  }

  RunResult memtrack(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {MEMTRACK_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv, 60s);
  }

  json json_report(const std::string& artifact) {
    RunResult run = memtrack({"report", "--format", "json", "--top", "0", artifact});
    EXPECT_EQ(run.exit_code(), 0) << run.describe();
    json document = json::parse(run.out, nullptr, false);
    return document.is_object() ? document : json::object();
  }

  static const json& process(const json& document, pid_t pid) {
    for (const json& p : document["processes"])
      if (p["pid"] == pid) return p;
    static const json none = json::object();
    ADD_FAILURE() << "no process " << pid;
    return none;
  }

  TempDir dir_;
};

constexpr unsigned long kBlocks = 1000;

// record --aggregate keeps its figures so far in OUTPUT.checkpoint: with its
// recorder SIGKILLed, the report gives those of its last checkpoint (the
// service's blocks live at its end, not leaks) and says where they come from.
TEST_F(RecordingEnd, AKilledAggregatedRecordingReportsItsLastCheckpoint) {
  const std::string artifact = dir_.file("c.zst");
  Child recording({MEMTRACK_BIN, "record", "-q", "--aggregate", "--checkpoint-every", "0.1", "-o", artifact, "--",
                  FX_LIBC, "service", std::to_string(kBlocks)});
  ASSERT_TRUE(recording.wait_for_stdout("ready ", 30s)) << recording.finish(5s).describe();
  const pid_t service = std::stoi(recording.out().substr(recording.out().find("ready ") + 6));
  std::this_thread::sleep_for(1s);  // checkpoints every 0.1 s since "ready"
  ASSERT_TRUE(std::filesystem::exists(checkpoint_path(artifact)));
  const pid_t recorder = recorder_of(recording.pid());
  ASSERT_GT(recorder, 0);
  kill(recorder, SIGKILL);
  EXPECT_TRUE(recording.wait_for_stderr("was killed by signal 9", 30s)) << recording.err();
  kill(service, SIGUSR1);  // serves, then leaves at SIGUSR2
  EXPECT_TRUE(recording.wait_for_stdout("served ", 30s)) << recording.err();
  kill(service, SIGUSR2);
  RunResult run = recording.finish(60s);
  EXPECT_FALSE(run.timed_out) << run.describe();

  // Not finalized (no trailer): the report says so with status 1.
  RunResult report = memtrack({"report", "--format", "json", "--top", "0", artifact});
  EXPECT_EQ(report.exit_code(), 1) << report.describe();
  json document = json::parse(report.out, nullptr, false);
  ASSERT_TRUE(document.is_object()) << report.describe();
  std::string warnings;
  for (const json& warning : document["warnings"]) warnings += warning.get<std::string>() + "\n";
  EXPECT_NE(warnings.find("the heap figures are those of its last checkpoint (" + checkpoint_path(artifact) + ")"),
            std::string::npos)
      << warnings;
  // Its N blocks of 48 bytes and the array of their N addresses.
  const json& figures = process(document, service);
  EXPECT_EQ(figures["live_at_end_count"], kBlocks + 1) << figures;
  EXPECT_EQ(figures["live_at_end_bytes"], kBlocks * 48 + kBlocks * 8) << figures;
  EXPECT_EQ(figures["leaked_bytes"], 0) << figures;
}

TEST_F(RecordingEnd, AttachedServiceHasBlocksLiveAtEndAndFreesOfEarlierBlocks) {
  const std::string artifact = dir_.file("a.zst");
  AttachedService run = record_attached_service(FX_LIBC, artifact, kBlocks);
  ASSERT_NE(run.service, 0);
  ASSERT_EQ(run.memtrack.exit_code(), 0) << run.memtrack.describe();

  json document = json_report(artifact);
  EXPECT_EQ(document["attached"], true);
  const json& features = document["header"]["features"];
  EXPECT_NE(std::find(features.begin(), features.end(), "attached"), features.end()) << features;
  EXPECT_EQ(document["recording_limits"].size(), 2u) << document["recording_limits"];
  const json& service = process(document, run.service);
  EXPECT_EQ(service["running_at_end"], true);
  EXPECT_EQ(service["exit_code"], nullptr);
  // The N blocks allocated before the attach, freed inside the recording.
  EXPECT_EQ(service["frees_of_earlier_blocks"], kBlocks);
  EXPECT_EQ(service["unmatched_frees"], 0);
  // The N blocks allocated inside and still held: live at end, not leaks.
  EXPECT_EQ(service["live_at_end_count"], kBlocks);
  EXPECT_EQ(service["live_at_end_bytes"], kBlocks * 80);
  EXPECT_EQ(service["leaked_bytes"], 0);
  // The child ended inside the recording: its block is a leak.
  const json& child = process(document, run.child);
  EXPECT_EQ(child["running_at_end"], false);
  EXPECT_EQ(child["exit_code"], 0);
  EXPECT_EQ(child["leaked_bytes"], 24);
  EXPECT_EQ(child["leaked_count"], 1);
  EXPECT_EQ(child["live_at_end_bytes"], 0);
  EXPECT_EQ(document["totals"]["exit_code"], nullptr) << "the service ran on: no exit";
  const json& sites = document["profile"]["totals"];
  EXPECT_EQ(sites["live_at_end_allocations"], kBlocks);
  EXPECT_EQ(sites["leaked_allocations"], 1);

  RunResult text = memtrack({"report", artifact});
  EXPECT_EQ(text.exit_code(), 0) << text.describe();
  for (const char* words : {"cannot know attached to running processes", "freed, allocated before",
                            "live at end", "not leaks", "Live at end, not leaks", "running",
                            "none: the process ran on after the recording"})
    EXPECT_NE(text.out.find(words), std::string::npos) << words << "\n" << text.out;

  // A budget on leaks holds (24 bytes, the child's), one on the blocks live
  // at the end breaks.
  RunResult leaks = memtrack({"check", artifact, "--max", "leaked<=24"});
  EXPECT_EQ(leaks.exit_code(), 0) << leaks.describe();
  RunResult live = memtrack({"check", artifact, "--max", "live_at_end<=1KiB"});
  EXPECT_EQ(live.exit_code(), 4) << live.describe();
  EXPECT_NE(live.out.find("live_at_end"), std::string::npos) << live.out;
}

// A command recorded to its end: it exits and leaks, the process it left
// behind runs on with its blocks live at the end.
TEST_F(RecordingEnd, ACommandThatExitsLeaksWhatItLeftBehindIsLiveAtEnd) {
  Recorded recorded = record_command(dir_, {FX_LIBC, "leavebehind"});
  size_t at = recorded.run.out.find("child ");
  ASSERT_NE(at, std::string::npos) << recorded.run.describe();
  const pid_t left_behind = std::stoi(recorded.run.out.substr(at + 6));
  // It waits for SIGUSR2 (or 60 s): end it now, whatever the checks say.
  struct Ender {
    pid_t pid;
    ~Ender() { kill(pid, SIGUSR2); }
  } ender{left_behind};
  ASSERT_EQ(recorded.run.exit_code(), 0) << recorded.run.describe();
  EXPECT_EQ(kill(left_behind, 0), 0) << "the process left behind is gone";

  json document = json_report(dir_.file("a.zst"));
  EXPECT_EQ(document["attached"], false);
  const json& command = document["processes"][0];
  EXPECT_EQ(command["running_at_end"], false);
  EXPECT_EQ(command["exit_code"], 0);
  EXPECT_GE(command["leaked_bytes"].get<uint64_t>(), 100u);
  EXPECT_EQ(command["live_at_end_bytes"], 0);
  const json& daemon = process(document, left_behind);
  EXPECT_EQ(daemon["running_at_end"], true);
  EXPECT_EQ(daemon["leaked_bytes"], 0);
  EXPECT_EQ(daemon["live_at_end_bytes"], 200);
  EXPECT_EQ(daemon["live_at_end_count"], 1);
  EXPECT_EQ(document["totals"]["frees_of_earlier_blocks"], 0);
  ASSERT_EQ(document["recording_limits"].size(), 1u);
  EXPECT_NE(document["recording_limits"][0].get<std::string>().find("ended before 1 of 2 processes"),
            std::string::npos)
      << document["recording_limits"];
}

}  // namespace
}  // namespace memtrack::testing
