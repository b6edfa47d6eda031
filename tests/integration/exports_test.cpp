// Exports read by the tools people already use, checked by those tools, not
// by our parser: `go tool pprof` (labels per process, command and thread;
// -tagfocus; the sample types) and speedscope's file-format schema
// (python3-jsonschema). The figures come from fixtures with known
// processes and threads (fx_libc fork, threads) and are compared with the
// JSON report's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <regex>
#include <sstream>

#include "recording.h"

namespace memtrack::testing {
namespace {

using nlohmann::json;

std::string go_binary() {
  for (const char* candidate : {"/usr/bin/go", "/usr/local/go/bin/go", "/usr/lib/go/bin/go"})
    if (access(candidate, X_OK) == 0) return candidate;
  return "";
}

// The sum of each sample type over the samples of `go tool pprof -raw`.
std::map<std::string, uint64_t> raw_totals(const std::string& out) {
  std::map<std::string, uint64_t> totals;
  // "Samples:", a line of TYPE/UNIT names, then "V1 V2 ...: LOCATION..." lines
  // (with label lines between), until "Locations".
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line) && line != "Samples:") {}
  if (!std::getline(in, line)) return totals;
  std::vector<std::string> types;
  std::istringstream names(line);
  for (std::string t; names >> t;) types.push_back(t.ends_with("[dflt]") ? t.substr(0, t.size() - 6) : t);
  for (const std::string& t : types) totals[t] = 0;
  static const std::regex sample(R"(^\s*((?:\d+\s+)*\d+):(.*)$)");
  while (std::getline(in, line) && line.rfind("Locations", 0) != 0) {
    std::smatch m;
    if (!std::regex_match(line, m, sample)) continue;
    std::istringstream values(m[1].str());
    size_t i = 0;
    for (uint64_t x; values >> x; ++i)
      if (i < types.size()) totals[types[i]] += x;
    EXPECT_EQ(i, types.size()) << line;
  }
  return totals;
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

  // `go tool pprof ARGS... FILE` (go writes nothing outside dir_; pprof
  // symbolizes nothing: the mappings say has_functions).
  RunResult go_pprof(const std::vector<std::string>& args, const std::string& file) {
    SpawnOptions env;
    env.env = {{"HOME", dir_.path()}, {"GOCACHE", dir_.file("gocache")}, {"PPROF_TMPDIR", dir_.path()},
               {"GOFLAGS", "-mod=mod"}, {"GOTOOLCHAIN", "local"}};
    std::vector<std::string> argv = {go_, "tool", "pprof", "-symbolize=none"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(file);
    return run_process(argv, std::chrono::seconds(60), env);
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
}

}  // namespace
}  // namespace memtrack::testing
