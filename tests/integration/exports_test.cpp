// Exports read by the tools people already use, checked by those tools, not
// by our parser: `go tool pprof` (labels per process, command and thread;
// -tagfocus; the sample types), speedscope's file-format schema
// (python3-jsonschema), heaptrack's heaptrack_print and Valgrind's ms_print.
// The figures come from fixtures with known processes and threads (fx_libc
// fork, threads, all), compared with the JSON report's, and from fixtures
// that know what they allocated (fx_libc's logged calls, fx_callpaths'
// figures scenario), compared with that ground truth: what each tool prints
// is what the program did, not only what our report says.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <regex>
#include <sstream>

#include <unistd.h>

#include "callpaths_figures.h"
#include "go_pprof.h"
#include "recording.h"

namespace memtrack::testing {
namespace {

using nlohmann::json;

// What fx_libc fork's `process` (a process of the JSON report) allocated
// through scenario_fork, by the fixture's ground truth: its logged calls
// and, in the parent, its two marker allocations.
struct Allocated {
  uint64_t calls = 0, bytes = 0;
};
Allocated scenario_fork_allocated(const GroundTruth& gt, const json& process) {
  Allocated a;
  for (const Event& e : gt.of(process["pid"].get<int>())) {
    if (e.type == EventType::Free) continue;
    ++a.calls;
    a.bytes += e.size;
  }
  if (process["parent_pid"].is_null()) {  // the parent made the markers
    a.calls += 2;
    a.bytes += MEMTRACK_MARKER_BEGIN + MEMTRACK_MARKER_END;
  }
  return a;
}

class Exports : public ::testing::Test {
 protected:
  void SetUp() override { MEMTRACK_REQUIRE_BPF_PRIVILEGES(); }

  // `memtrack record -q --stacks -o DIR/name -- command`; the fixture's
  // stdout in fixture_out_.
  std::string record(const std::string& name, const std::vector<std::string>& command) {
    std::string artifact = dir_.file(name);
    std::vector<std::string> argv = {MEMTRACK_BIN, "record", "-q", "--stacks", "-o", artifact, "--"};
    argv.insert(argv.end(), command.begin(), command.end());
    RunResult run = run_process(argv, std::chrono::seconds(90));
    EXPECT_EQ(run.exit_code(), 0) << run.describe();
    fixture_out_ = run.out;
    return artifact;
  }

  std::string report(const std::string& artifact, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {MEMTRACK_BIN, "report"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(artifact);
    RunResult run = run_process(argv, std::chrono::seconds(60));
    EXPECT_EQ(run.exit_code(), 0) << run.describe();
    return run.out;
  }

  json json_report(const std::string& artifact) {
    json document = json::parse(report(artifact, {"--format", "json", "--top", "0"}), nullptr, false);
    EXPECT_TRUE(document.is_object() && document.contains("processes") && document.contains("profile"));
    return document.is_object() ? document : json::object();
  }

  RunResult go_pprof(const std::vector<std::string>& args, const std::string& file) {
    return run_go_pprof(go_, dir_, args, file);
  }

  // go tool pprof -raw's totals over the samples whose label `key` is
  // exactly `value` (-tagfocus).
  std::map<std::string, uint64_t> focused_totals(const std::string& file, const std::string& key,
                                                 const std::string& value) {
    RunResult run = go_pprof({"-raw", "-tagfocus", key + "=^" + value + "$"}, file);
    EXPECT_EQ(run.exit_code(), 0) << run.describe();
    return raw_totals(run.out);
  }

  bool find_go() {
    go_ = go_binary();
    if (!go_.empty()) return true;
    std::fputs("\n*** SKIPPED: `go` not found: the pprof export was NOT checked with go tool pprof ***\n", stderr);
    return false;
  }

  TempDir dir_;
  std::string fixture_out_;
  std::string go_;
};

// fx_libc fork: two processes. Every sample carries pid, thread and
// command labels; -tagfocus on a pid selects exactly that process's
// allocations (the JSON report's figures of it).
TEST_F(Exports, PprofLabelsSelectEachProcess) {
  if (!find_go()) GTEST_SKIP() << "`go` not found: the pprof export was NOT checked with go tool pprof";
  std::string artifact = record("fork.zst", {FX_LIBC, "fork"});
  ASSERT_FALSE(HasFailure());
  json document = json_report(artifact);
  ASSERT_EQ(document["processes"].size(), 2u) << document["processes"].dump();
  std::string pprof = dir_.file("fork.pb.gz");
  report(artifact, {"--format", "pprof", "-o", pprof});

  RunResult tags = go_pprof({"-tags", "-sample_index=alloc_objects"}, pprof);
  ASSERT_EQ(tags.exit_code(), 0) << tags.describe();
  for (const char* key : {"pid:", "thread:", "command:"})
    EXPECT_NE(tags.out.find(key), std::string::npos) << key << " missing in\n" << tags.out;

  for (const json& process : document["processes"]) {
    std::string pid = std::to_string(process["pid"].get<int>());
    EXPECT_NE(tags.out.find(": " + pid + "\n"), std::string::npos) << "pid " << pid << " in\n" << tags.out;
    EXPECT_NE(tags.out.find(process["command"].get<std::string>()), std::string::npos) << tags.out;
    auto totals = focused_totals(pprof, "pid", pid);
    EXPECT_EQ(totals["alloc_objects/count"], process["alloc_calls"].get<uint64_t>()) << "pid " << pid;
    EXPECT_EQ(totals["alloc_space/bytes"], process["total_allocated"].get<uint64_t>()) << "pid " << pid;
  }
  // Guards the labels against the fixture's ground truth, not our report:
  // the samples of each pid through scenario_fork are its logged calls and,
  // in the parent, its two marker allocations.
  GroundTruth gt = parse_ground_truth(fixture_out_);
  ASSERT_EQ(gt.pids().size(), 2u) << fixture_out_;
  for (const json& process : document["processes"]) {
    int pid = process["pid"].get<int>();
    Allocated truth = scenario_fork_allocated(gt, process);
    RunResult focused =
        go_pprof({"-raw", "-focus", "^scenario_fork$", "-tagfocus", "pid=^" + std::to_string(pid) + "$"}, pprof);
    ASSERT_EQ(focused.exit_code(), 0) << focused.describe();
    auto totals = raw_totals(focused.out);
    EXPECT_EQ(totals["alloc_objects/count"], truth.calls) << "pid " << pid << "\n" << focused.out;
    EXPECT_EQ(totals["alloc_space/bytes"], truth.bytes) << "pid " << pid << "\n" << focused.out;
    EXPECT_EQ(totals["inuse_space/bytes"], 0u) << "scenario_fork frees all it allocates\n" << focused.out;
  }

  // A label value no sample has selects nothing (pprof fails or shows no sample).
  RunResult none = go_pprof({"-raw", "-tagfocus", "pid=^0$"}, pprof);
  if (none.exit_code() == 0) {
    EXPECT_EQ(raw_totals(none.out)["alloc_objects/count"], 0u) << none.out;
  }

  // The whole profile: every sample type sums to the JSON totals.
  RunResult all = go_pprof({"-raw"}, pprof);
  ASSERT_EQ(all.exit_code(), 0) << all.describe();
  auto totals = raw_totals(all.out);
  const json& t = document["profile"]["totals"];
  EXPECT_EQ(totals.size(), 6u);
  EXPECT_EQ(totals["alloc_objects/count"], t["allocations"].get<uint64_t>());
  EXPECT_EQ(totals["alloc_space/bytes"], t["allocated_bytes"].get<uint64_t>());
  EXPECT_EQ(totals["inuse_objects/count"], t["leaked_allocations"].get<uint64_t>());
  EXPECT_EQ(totals["inuse_space/bytes"], t["leaked_bytes"].get<uint64_t>());
  EXPECT_EQ(totals["peak_objects/count"], t["peak_allocations"].get<uint64_t>());
  EXPECT_EQ(totals["peak_space/bytes"], t["peak_bytes"].get<uint64_t>());
  EXPECT_NE(all.out.find("inuse_space/bytes[dflt]"), std::string::npos) << "the default sample type";
}

// A recording attached to a service and stopped while it runs on: pprof's
// inuse is what was in use at the end, the child's leak and the service's
// blocks live at end, and a comment says how much of each.
TEST_F(Exports, PprofInUseOfAnAttachedRecordingIsLeakedAndLiveAtEnd) {
  if (!find_go()) GTEST_SKIP() << "`go` not found: the pprof export was NOT checked with go tool pprof";
  std::string artifact = dir_.file("attached.zst");
  AttachedService service = record_attached_service(FX_LIBC, artifact, 100);
  ASSERT_NE(service.service, 0);
  json document = json_report(artifact);
  const json& t = document["profile"]["totals"];
  ASSERT_EQ(t["live_at_end_allocations"], 100);
  std::string pprof = dir_.file("attached.pb.gz");
  report(artifact, {"--format", "pprof", "-o", pprof});
  RunResult all = go_pprof({"-raw"}, pprof);
  ASSERT_EQ(all.exit_code(), 0) << all.describe();
  auto totals = raw_totals(all.out);
  EXPECT_EQ(totals["inuse_objects/count"],
            t["leaked_allocations"].get<uint64_t>() + t["live_at_end_allocations"].get<uint64_t>());
  EXPECT_EQ(totals["inuse_space/bytes"], t["leaked_bytes"].get<uint64_t>() + t["live_at_end_bytes"].get<uint64_t>());
  RunResult comments = go_pprof({"-comments"}, pprof);
  ASSERT_EQ(comments.exit_code(), 0) << comments.describe();
  EXPECT_NE(comments.out.find("memtrack record --pid " + std::to_string(service.service) + "\n"), std::string::npos)
      << comments.out;
  EXPECT_NE(comments.out.find("inuse_objects and inuse_space: 8000 bytes in 100 blocks live at the end of the "
                              "recording in processes still running (not leaks), 24 bytes in 1 blocks leaked"),
            std::string::npos)
      << comments.out;
}

// fx_libc threads 3 5: each thread makes 5 allocations of a size of its own
// (the fixture prints "info PID thread TID SIZE"); -tagfocus on a thread
// gives exactly those.
TEST_F(Exports, PprofThreadLabelsSelectEachThread) {
  if (!find_go()) GTEST_SKIP() << "`go` not found: the pprof export was NOT checked with go tool pprof";
  std::string artifact = record("threads.zst", {FX_LIBC, "threads", "3", "5"});
  ASSERT_FALSE(HasFailure());
  std::string pprof = dir_.file("threads.pb.gz");
  report(artifact, {"--format", "pprof", "-o", pprof});
  static const std::regex info(R"(info (\d+) thread (\d+) (\d+))");
  size_t threads = 0;
  for (std::sregex_iterator it(fixture_out_.begin(), fixture_out_.end(), info), end; it != end; ++it, ++threads) {
    std::string tid = (*it)[2];
    uint64_t size = std::stoull((*it)[3]);
    auto totals = focused_totals(pprof, "thread", tid);
    EXPECT_EQ(totals["alloc_objects/count"], 5u) << "thread " << tid;
    EXPECT_EQ(totals["alloc_space/bytes"], 5 * size) << "thread " << tid;
  }
  EXPECT_EQ(threads, 3u) << fixture_out_;
}

// speedscope: the export of fx_libc fork is valid against speedscope's
// schema; one profile per process and cost, whose weights sum to the JSON
// report's figures.
TEST_F(Exports, SpeedscopeIsValidAndHasTheFigures) {
  std::string artifact = record("fork.zst", {FX_LIBC, "fork"});
  ASSERT_FALSE(HasFailure());
  json document = json_report(artifact);
  std::string file = dir_.file("fork.speedscope.json");
  report(artifact, {"--format", "speedscope", "-o", file});
  RunResult check = run_process({"/usr/bin/python3", SPEEDSCOPE_DIR "/check_speedscope.py",
                                 SPEEDSCOPE_DIR "/file-format-schema.json", file},
                                std::chrono::seconds(60));
  if (check.exit_code() == 2) {
    std::fputs("\n*** SKIPPED: python3 jsonschema missing: the speedscope export was NOT validated ***\n", stderr);
    GTEST_SKIP() << check.err;
  }
  ASSERT_EQ(check.exit_code(), 0) << check.describe();
  json profiles = json::parse(check.out, nullptr, false);
  ASSERT_TRUE(profiles.is_object()) << check.out;
  ASSERT_EQ(document["processes"].size(), 2u);
  EXPECT_EQ(profiles.size(), 2u * 4u) << profiles.dump();
  uint64_t peak = 0;
  for (const json& process : document["processes"]) {
    std::string name = "pid " + std::to_string(process["pid"].get<int>()) + ": " +
                       process["command"].get<std::string>() + " - ";
    auto total = [&](const std::string& cost) -> uint64_t {
      if (!profiles.contains(name + cost)) {
        ADD_FAILURE() << "no profile \"" << name + cost << "\" in " << profiles.dump();
        return 0;
      }
      return profiles[name + cost][1].get<uint64_t>();
    };
    EXPECT_EQ(total("allocated bytes"), process["total_allocated"].get<uint64_t>()) << name;
    EXPECT_EQ(total("allocations"), process["alloc_calls"].get<uint64_t>()) << name;
    EXPECT_EQ(total("leaked bytes"), process["leaked_bytes"].get<uint64_t>()) << name;
    peak += total("bytes live at the peak");
  }
  EXPECT_EQ(peak, document["profile"]["totals"]["peak_bytes"].get<uint64_t>());

  // Against what the fixture knows it allocated (its ground truth), not our
  // report: the call paths through scenario_fork are its logged calls and,
  // in the parent, its two marker allocations.
  GroundTruth gt = parse_ground_truth(fixture_out_);
  ASSERT_EQ(gt.pids().size(), 2u) << fixture_out_;
  std::string focused = dir_.file("fork.scenario.speedscope.json");
  report(artifact, {"--format", "speedscope", "--function", "scenario_fork", "-o", focused});
  RunResult focused_check = run_process({"/usr/bin/python3", SPEEDSCOPE_DIR "/check_speedscope.py",
                                         SPEEDSCOPE_DIR "/file-format-schema.json", focused},
                                        std::chrono::seconds(60));
  ASSERT_EQ(focused_check.exit_code(), 0) << focused_check.describe();
  json focused_profiles = json::parse(focused_check.out, nullptr, false);
  for (const json& process : document["processes"]) {
    int pid = process["pid"].get<int>();
    Allocated truth = scenario_fork_allocated(gt, process);
    std::string name = "pid " + std::to_string(pid) + ": " + process["command"].get<std::string>() + " - ";
    ASSERT_TRUE(focused_profiles.contains(name + "allocations")) << focused_profiles.dump();
    EXPECT_EQ(focused_profiles[name + "allocations"][1].get<uint64_t>(), truth.calls) << name;
    EXPECT_EQ(focused_profiles[name + "allocated bytes"][1].get<uint64_t>(), truth.bytes) << name;
  }
}

// heaptrack_print's sizes: base 1000, two decimals past bytes
// (heaptrack's formatBytes).
std::string heaptrack_bytes(uint64_t bytes) {
  static const char* const units[] = {"B", "K", "M", "G", "T", "P"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (unit + 1 < std::size(units) && value > 1000.) {
    value /= 1000.;
    ++unit;
  }
  if (unit == 0) return std::to_string(bytes) + "B";
  char text[64];
  std::snprintf(text, sizeof(text), "%.2f%s", value, units[unit]);
  return text;
}

// A JSON report's totals as Figures (a missing figure throws: no silent 0).
Figures figures_of(const json& totals) {
  auto get = [&](const char* key) { return totals.at(key).get<uint64_t>(); };
  return {get("allocations"),        get("allocated_bytes"),      get("peak_bytes"),
          get("peak_allocations"),   get("leaked_bytes"),         get("leaked_allocations"),
          get("temporary_allocations"), get("temporary_bytes")};
}

// The number after `label` on a line of `out` ("calls to allocation functions: 12 (...)").
std::string field(const std::string& out, const std::string& label) {
  size_t at = out.find(label);
  if (at == std::string::npos) return "<no \"" + label + "\">";
  size_t start = at + label.size();
  size_t end = out.find_first_of(" \n", start);
  return out.substr(start, end - start);
}

class HeaptrackExport : public Exports {
 protected:
  // `heaptrack_print ARGS -f FILE`.
  RunResult heaptrack_print(const std::vector<std::string>& args, const std::string& file) {
    std::vector<std::string> argv = {"/usr/bin/heaptrack_print"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"-f", file});
    return run_process(argv, std::chrono::seconds(60));
  }

  // heaptrack_print's flame graph stacks (-F) of one cost, summed.
  uint64_t flamegraph_total(const std::string& file, const std::string& cost) {
    std::string stacks = dir_.file("stacks-" + cost + ".txt");
    RunResult run = heaptrack_print({"-F", stacks, "--flamegraph-cost-type", cost}, file);
    EXPECT_EQ(run.exit_code(), 0) << run.describe();
    std::ifstream in(stacks);
    uint64_t total = 0;
    for (std::string line; std::getline(in, line);) {
      size_t space = line.rfind(' ');
      if (space != std::string::npos) total += std::stoull(line.substr(space + 1));
    }
    return total;
  }

  // heaptrack_print's summary of `file` (`print`) and its per-stack costs
  // show these allocations, temporaries, peak and leaked bytes.
  void expect_figures(const std::string& file, const RunResult& print, const Figures& f) {
    EXPECT_EQ(print.err.find("failed to parse"), std::string::npos) << print.err;
    EXPECT_EQ(field(print.out, "calls to allocation functions: "), std::to_string(f.allocations)) << print.out;
    EXPECT_EQ(field(print.out, "temporary memory allocations: "), std::to_string(f.temporary_allocations))
        << print.out;
    EXPECT_EQ(field(print.out, "peak heap memory consumption: "), heaptrack_bytes(f.peak_bytes)) << print.out;
    EXPECT_EQ(field(print.out, "total memory leaked: "), heaptrack_bytes(f.leaked_bytes)) << print.out;
    // The exact figures, from heaptrack's own per-stack costs.
    EXPECT_EQ(flamegraph_total(file, "allocations"), f.allocations);
    EXPECT_EQ(flamegraph_total(file, "temporary"), f.temporary_allocations);
    EXPECT_EQ(flamegraph_total(file, "peak"), f.peak_bytes);
    EXPECT_EQ(flamegraph_total(file, "leaked"), f.leaked_bytes);
  }

  // heaptrack_print on the export of `artifact` restricted to `pid` shows
  // the report's figures of that selection; its sites by calls are the
  // report's innermost frames with their calls.
  void check_process(const std::string& artifact, int pid) {
    SCOPED_TRACE("pid " + std::to_string(pid));
    std::string file = dir_.file("pid" + std::to_string(pid) + ".heaptrack.gz");
    report(artifact, {"--format", "heaptrack", "--pid", std::to_string(pid), "-o", file});
    json document = json::parse(report(artifact, {"--format", "json", "--top", "0", "--by", "count", "--pid",
                                                  std::to_string(pid)}),
                                nullptr, false);
    ASSERT_TRUE(document.is_object());
    const json& totals = document["profile"]["totals"];
    ASSERT_GT(totals["allocations"].get<uint64_t>(), 0u);

    RunResult print = heaptrack_print({"--print-leaks"}, file);
    ASSERT_EQ(print.exit_code(), 0) << print.describe();
    expect_figures(file, print, figures_of(totals));

    // "N calls to allocation functions with ... from\nFUNCTION\n  at FILE:LINE":
    // heaptrack merges call paths by their innermost frame, so each is the
    // sum of the report's sites with that innermost frame.
    std::map<std::string, uint64_t> calls_by_frame;
    for (const json& site : document["profile"]["sites"]) {
      const json& frame = site["frames"][0];
      calls_by_frame[frame["function"].get<std::string>() + " at " + frame["file"].get<std::string>() + ":" +
                     std::to_string(frame["line"].get<int>())] += site["costs"]["allocations"].get<uint64_t>();
    }
    static const std::regex entry(R"((\d+) calls to allocation functions with .* from\n(\S[^\n]*)\n  at ([^\n]*)\n)");
    size_t entries = 0;
    for (std::sregex_iterator it(print.out.begin(), print.out.end(), entry), end; it != end; ++it, ++entries) {
      std::string frame = (*it)[2].str() + " at " + (*it)[3].str();
      ASSERT_TRUE(calls_by_frame.contains(frame)) << frame << " is no innermost frame of the report";
      EXPECT_EQ(std::stoull((*it)[1]), calls_by_frame[frame]) << frame;
    }
    EXPECT_GT(entries, 0u) << print.out;
    // The first is the report's costliest innermost frame.
    uint64_t most = 0;
    for (const auto& [frame, calls] : calls_by_frame) most = std::max(most, calls);
    std::smatch first;
    ASSERT_TRUE(std::regex_search(print.out, first, entry)) << print.out;
    EXPECT_EQ(std::stoull(first[1]), most) << print.out;
  }
};

// fx_libc fork: one file per process (heaptrack's model); each shows that
// process's figures. Without --pid the export refuses and names the pids.
TEST_F(HeaptrackExport, HeaptrackPrintShowsTheFiguresOfEachProcess) {
  std::string artifact = record("fork.zst", {FX_LIBC, "fork"});
  ASSERT_FALSE(HasFailure());
  json document = json_report(artifact);
  ASSERT_EQ(document["processes"].size(), 2u);
  for (const json& process : document["processes"]) check_process(artifact, process["pid"].get<int>());

  RunResult merged = run_process({MEMTRACK_BIN, "report", "--format", "heaptrack", "-o", dir_.file("all.gz"), artifact},
                                 std::chrono::seconds(60));
  EXPECT_NE(merged.exit_code(), 0) << merged.describe();
  for (const json& process : document["processes"])
    EXPECT_NE(merged.err.find(std::to_string(process["pid"].get<int>())), std::string::npos) << merged.err;
  EXPECT_NE(merged.err.find("--pid"), std::string::npos) << merged.err;

  // heaptrack's tools read a name without ".gz" as plain text: refused.
  int pid = document["processes"][0]["pid"].get<int>();
  RunResult named = run_process({MEMTRACK_BIN, "report", "--format", "heaptrack", "--pid", std::to_string(pid), "-o",
                                 dir_.file("app.heaptrack"), artifact},
                                std::chrono::seconds(60));
  EXPECT_NE(named.exit_code(), 0) << named.describe();
  EXPECT_NE(named.err.find(".gz"), std::string::npos) << named.err;
}

// fx_libc threads 3 5 (15 temporary allocations, one per malloc+free of
// each thread) and all (every allocation function, leaks none): the same
// figures, temporaries included.
// heaptrack's "leaked" is what was not freed at the end: for a service the
// recording ended before, its blocks live at end, which a comment in the
// file tells apart.
TEST_F(HeaptrackExport, AnAttachedServicesBlocksLiveAtEndAreHeaptracksLeaked) {
  std::string artifact = dir_.file("attached.zst");
  AttachedService service = record_attached_service(FX_LIBC, artifact, 100);
  ASSERT_NE(service.service, 0);
  const std::string pid = std::to_string(service.service);
  std::string file = dir_.file("service.heaptrack.gz");
  report(artifact, {"--format", "heaptrack", "--pid", pid, "-o", file});
  json document = json::parse(report(artifact, {"--format", "json", "--top", "0", "--pid", pid}), nullptr, false);
  ASSERT_TRUE(document.is_object());
  const json& totals = document["profile"]["totals"];
  ASSERT_EQ(totals["live_at_end_bytes"], 8000);
  ASSERT_EQ(totals["leaked_bytes"], 0);
  RunResult print = heaptrack_print({"--print-leaks"}, file);
  ASSERT_EQ(print.exit_code(), 0) << print.describe();
  EXPECT_EQ(field(print.out, "total memory leaked: "), heaptrack_bytes(8000)) << print.out;
  EXPECT_EQ(flamegraph_total(file, "leaked"), 8000u);
  RunResult lines = run_process({"/bin/zcat", file}, std::chrono::seconds(30));
  EXPECT_NE(lines.out.find("# 8000 B of what heaptrack counts as leaked were live at the end of the recording"),
            std::string::npos);
}

TEST_F(HeaptrackExport, HeaptrackPrintShowsTemporariesAndEveryFunction) {
  for (const char* scenario : {"threads", "all"}) {
    SCOPED_TRACE(scenario);
    std::vector<std::string> command = {FX_LIBC, scenario};
    if (std::string(scenario) == "threads") command.insert(command.end(), {"3", "5"});
    std::string artifact = record(std::string(scenario) + ".zst", command);
    ASSERT_FALSE(HasFailure());
    json document = json_report(artifact);
    ASSERT_EQ(document["processes"].size(), 1u);
    if (std::string(scenario) == "threads") {
      EXPECT_GE(document["profile"]["totals"]["temporary_allocations"].get<uint64_t>(), 15u);
    }
    check_process(artifact, document["processes"][0]["pid"].get<int>());
  }
}

// heaptrack_gui loads the export (under Xvfb) without crashing: it counts
// allocation infos in the order of their first allocation and read past
// its table when info 1 was allocated before info 0 (the first version of
// the export crashed it on every file).
TEST_F(HeaptrackExport, HeaptrackGuiLoadsTheFile) {
  if (access("/usr/bin/heaptrack_gui", X_OK) != 0 || access("/usr/bin/xvfb-run", X_OK) != 0) {
    std::fputs("\n*** SKIPPED: heaptrack_gui or xvfb-run missing: the GUI was NOT run on the export ***\n", stderr);
    GTEST_SKIP();
  }
  std::string artifact = record("all.zst", {FX_LIBC, "all"});
  ASSERT_FALSE(HasFailure());
  std::string file = dir_.file("all.heaptrack.gz");
  report(artifact, {"--format", "heaptrack", "-o", file});
  // Still running after 10 s (timeout's status 124) without a complaint: the
  // file was read and its views built; a crash is 128 + the signal. A file
  // it cannot read keeps it running too (an error dialog), but it complains
  // on stderr ("failed to parse line", "unexpected non-hex char"): the
  // garbage file shows that this check can fail.
  SpawnOptions env;
  env.env = {{"HOME", dir_.path()}, {"XDG_RUNTIME_DIR", dir_.path()}, {"PATH", "/usr/bin:/bin"}};
  auto run_gui = [&](const std::string& path, const char* seconds) {
    return run_process({"/usr/bin/xvfb-run", "-a", "/usr/bin/timeout", seconds, "/usr/bin/heaptrack_gui", path},
                       std::chrono::seconds(60), env);
  };
  // What it printed besides Qt's note on the runtime directory's mode.
  auto complaints = [](const RunResult& r) {
    std::istringstream lines(r.out + r.err);
    std::string said;
    for (std::string line; std::getline(lines, line);)
      if (!line.empty() && line.rfind("QStandardPaths:", 0) != 0) said += line + "\n";
    return said;
  };
  ASSERT_GT(std::filesystem::file_size(file), 0u);
  RunResult gui = run_gui(file, "10");
  EXPECT_EQ(gui.exit_code(), 124) << gui.describe();
  EXPECT_EQ(complaints(gui), "") << gui.describe();
  std::string garbage = dir_.file("garbage.heaptrack");
  std::ofstream(garbage) << "this is not a heaptrack file\n";
  RunResult refused = run_gui(garbage, "5");
  EXPECT_NE(complaints(refused), "") << "the GUI says nothing of a file it cannot read: this check would pass on any "
                                        "file; "
                                     << refused.describe();
}

// 1234567 as ms_print writes it: "1,234,567".
std::string commify(uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// The total(B) of each snapshot row ms_print prints: "  n  time(ms)
// total(B)  useful-heap(B)  extra-heap(B)  stacks(B)".
std::vector<uint64_t> snapshot_totals(const std::string& out) {
  static const std::regex row(R"(^\s*(\d+)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s+0\s+0\s*$)");
  std::vector<uint64_t> totals;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    std::string bytes = m[3].str();
    bytes.erase(std::remove(bytes.begin(), bytes.end(), ','), bytes.end());
    totals.push_back(std::stoull(bytes));
  }
  return totals;
}

// ms_print reads the massif export of fx_libc threads: its snapshot table
// shows the heap series at the snapshots and the peak, and the tree at the
// peak shows the functions holding it with their bytes.
TEST_F(Exports, MsPrintShowsTheHeapOverTimeAndThePeak) {
  std::string artifact = record("threads.zst", {FX_LIBC, "threads", "3", "5"});
  ASSERT_FALSE(HasFailure());
  json document = json::parse(report(artifact, {"--format", "json", "--top", "0", "--by", "peak"}), nullptr, false);
  ASSERT_TRUE(document.is_object() && document.contains("timeline"));
  std::string file = dir_.file("massif.out");
  report(artifact, {"--format", "massif", "-o", file});
  RunResult print = run_process({"/usr/bin/ms_print", file}, std::chrono::seconds(60));
  ASSERT_EQ(print.exit_code(), 0) << print.describe();

  const json& total = document["timeline"]["total"];
  uint64_t peak = total["peaks"]["heap"]["bytes"].get<uint64_t>();
  ASSERT_GT(peak, 0u);
  std::set<uint64_t> series = {0, peak};
  for (const json& value : total["buckets"]["heap_last"]) series.insert(value.get<uint64_t>());
  size_t rows = 0, peak_rows = 0;
  for (uint64_t value : snapshot_totals(print.out)) {
    ++rows;
    EXPECT_TRUE(series.contains(value)) << value << ": not a value of the heap series";
    if (value == peak) ++peak_rows;
  }
  EXPECT_GE(rows, 3u) << print.out;
  EXPECT_GE(peak_rows, 1u) << print.out;
  EXPECT_NE(print.out.find("(peak)"), std::string::npos) << print.out;
  // ms_print's peak is ours; the sites at the peak, by innermost function,
  // with their bytes, in the peak's tree.
  std::map<std::string, uint64_t> by_function;
  for (const json& site : document["profile"]["sites"])
    by_function[site["frames"][0]["function"].get<std::string>()] += site["costs"]["peak_bytes"].get<uint64_t>();
  ASSERT_FALSE(by_function.empty());
  size_t shown = 0;
  for (const auto& [function, bytes] : by_function) {
    if (bytes * 100 < peak) continue;  // below massif's threshold
    ++shown;
    EXPECT_NE(print.out.find("(" + commify(bytes) + "B) 0x0: " + function + "\n"), std::string::npos)
        << function << " with " << bytes << " B\n"
        << print.out;
  }
  EXPECT_GT(shown, 0u);
}

// fx_callpaths figures: a program that knows what it allocates
// (callpaths_figures.h): 3 x 1000 bytes leaked from site_a_function, 10 x
// 4096 live at the heap's peak from site_b_function, 100 malloc(64)/free
// pairs from site_c_function, nothing else. Each tool's figures are checked
// against those, not against our report.
class KnownFigures : public HeaptrackExport {
 protected:
  void SetUp() override {
    HeaptrackExport::SetUp();
    if (IsSkipped()) return;
    artifact_ = record("figures.zst", {FX_CALLPATHS, "figures"});
  }
  std::string artifact_;
};

// Guards pprof's sample values against the program's allocations: go tool
// pprof's sums of every sample type, in all and per site (-focus).
TEST_F(KnownFigures, PprofSumsAreWhatTheProgramAllocated) {
  if (!find_go()) GTEST_SKIP() << "`go` not found: the pprof export was NOT checked with go tool pprof";
  ASSERT_FALSE(HasFailure());
  std::string pprof = dir_.file("figures.pb.gz");
  report(artifact_, {"--format", "pprof", "-o", pprof});
  auto expect_sums = [&](const std::vector<std::string>& args, const Figures& f) {
    RunResult run = go_pprof(args, pprof);
    ASSERT_EQ(run.exit_code(), 0) << run.describe();
    auto totals = raw_totals(run.out);
    EXPECT_EQ(totals.size(), 6u) << run.out;
    EXPECT_EQ(totals["alloc_objects/count"], f.allocations) << run.out;
    EXPECT_EQ(totals["alloc_space/bytes"], f.allocated_bytes) << run.out;
    EXPECT_EQ(totals["inuse_objects/count"], f.leaked_allocations) << run.out;
    EXPECT_EQ(totals["inuse_space/bytes"], f.leaked_bytes) << run.out;
    EXPECT_EQ(totals["peak_objects/count"], f.peak_allocations) << run.out;
    EXPECT_EQ(totals["peak_space/bytes"], f.peak_bytes) << run.out;
  };
  expect_sums({"-raw"}, kFiguresTotals);
  expect_sums({"-raw", "-focus", "^site_a_function$"}, kSiteA);
  expect_sums({"-raw", "-focus", "^site_b_function$"}, kSiteB);
  expect_sums({"-raw", "-focus", "^site_c_function$"}, kSiteC);
}

// Guards the heaptrack export against the program's allocations:
// heaptrack_print's calls, temporaries, peak and leak, in its summary and
// its per-stack costs, and its per-site calls and peaks.
TEST_F(KnownFigures, HeaptrackPrintShowsWhatTheProgramAllocated) {
  ASSERT_FALSE(HasFailure());
  std::string file = dir_.file("figures.heaptrack.gz");
  report(artifact_, {"--format", "heaptrack", "-o", file});
  RunResult print = heaptrack_print({"--print-leaks"}, file);
  ASSERT_EQ(print.exit_code(), 0) << print.describe();
  expect_figures(file, print, kFiguresTotals);
  for (const auto& [function, f] : {std::pair{"site_a_function", kSiteA}, std::pair{"site_b_function", kSiteB},
                                    std::pair{"site_c_function", kSiteC}}) {
    std::string calls = std::to_string(f.allocations) + " calls to allocation functions with " +
                        heaptrack_bytes(f.peak_bytes) + " peak consumption from\n" + function + "\n";
    EXPECT_NE(print.out.find(calls), std::string::npos) << "no \"" << calls << "\" in\n" << print.out;
  }
}

// Guards the massif export against the program's heap: ms_print's largest
// snapshot is the program's peak, and the peak's tree holds site B's 10 x
// 4096 and site A's 3 x 1000 bytes.
TEST_F(KnownFigures, MsPrintShowsTheProgramsPeak) {
  ASSERT_FALSE(HasFailure());
  std::string file = dir_.file("massif.out");
  report(artifact_, {"--format", "massif", "-o", file});
  RunResult print = run_process({"/usr/bin/ms_print", file}, std::chrono::seconds(60));
  ASSERT_EQ(print.exit_code(), 0) << print.describe();
  std::vector<uint64_t> totals = snapshot_totals(print.out);
  ASSERT_FALSE(totals.empty()) << print.out;
  EXPECT_EQ(*std::max_element(totals.begin(), totals.end()), kFiguresTotals.peak_bytes) << print.out;
  for (const std::string& entry :
       {"100.00% (" + commify(kFiguresTotals.peak_bytes) + "B) (heap allocation functions)",
        "(" + commify(kSiteB.peak_bytes) + "B) 0x0: site_b_function\n",
        "(" + commify(kSiteA.peak_bytes) + "B) 0x0: site_a_function\n"})
    EXPECT_NE(print.out.find(entry), std::string::npos) << "no \"" << entry << "\" in\n" << print.out;
  EXPECT_EQ(print.out.find("site_c_function"), std::string::npos) << "nothing of site C is live at the peak";
}

}  // namespace
}  // namespace memtrack::testing
