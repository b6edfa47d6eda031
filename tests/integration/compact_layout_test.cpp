// The compact layout changes nothing a user sees (issue 26): a recording
// made once in the records layout (real addresses, nanoseconds) is written
// again in both layouts — the records layout with the allocation records'
// times rounded to the compact layout's tick, and the compact layout by
// `memtrack convert` — and every output of `report` (each format, and the
// views that use times), `diff` and `check` is compared byte for byte. The
// programs: fx_libc's processes and threads on both recording paths, fx_callpaths'
// call paths, and python3 (0.5 M allocator calls) when it is installed.
// Also: the seed's layout comes back from a compact artifact (`convert
// --layout records`) with the same outputs, and `dump` names blocks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "recording.h"

namespace memtrack::testing {
namespace {

constexpr uint64_t kTickNs = 10'000;  // docs/FORMAT.md §2.7

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

RunResult memtrack(std::vector<std::string> args) {
  args.insert(args.begin(), MEMTRACK_BIN);
  return run_process(args, std::chrono::seconds(120));
}

// The recording at `from` written again in the records layout, with its
// allocation records' times rounded down to the tick.
void write_rounded_records(const std::string& from, const std::string& to) {
  ArtifactHeader header = read_artifact_header(from);
  ArtifactWriter writer(to, header, {.layout = ArtifactLayout::Records});
  ReadResult read = read_artifact(
      from,
      [&](const Event& event) {
        if (is_allocation(event.type) || event.type == EventType::Free) {
          Event rounded = event;
          rounded.timestamp -= rounded.timestamp % kTickNs;
          writer.append(rounded);
        } else {
          writer.append(event);
        }
      },
      [&](const ModuleInfo& module) { writer.append_module(std::make_shared<const ModuleInfo>(module)); });
  ASSERT_FALSE(read.error) << *read.error;
  writer.finish(read.trailer.value_or(ArtifactTrailer{}));
}

// Every output the user can ask of one recording, by name.
std::vector<std::pair<std::string, std::vector<std::string>>> report_commands(const std::string& artifact,
                                                                                const std::string& out) {
  std::vector<std::pair<std::string, std::vector<std::string>>> commands;
  for (const char* format : {"text", "json", "folded", "pprof", "speedscope", "html", "csv", "heaptrack", "massif"})
    commands.push_back({format, {"report", "--format", format, "-o", out, artifact}});
  for (const char* by : {"peak", "leaked", "temporary", "count"})
    commands.push_back({std::string("text --by ") + by, {"report", "--by", by, "-o", out, artifact}});
  commands.push_back({"text --tree top-down", {"report", "--tree", "top-down", "-o", out, artifact}});
  commands.push_back({"json --at 0.001", {"report", "--format", "json", "--at", "0.001", "-o", out, artifact}});
  commands.push_back({"check", {"check", "--max", "peak<=1GiB", "--max", "leaked<=0", "-o", out, artifact}});
  commands.push_back({"check json", {"check", "--format", "json", "--max", "peak<=1KiB", "-o", out, artifact}});
  return commands;
}

// Runs every command on the artifact at `path` (the same name for both
// layouts, since outputs may name it), returning each one's output. The
// things allowed to differ, the artifact's format version and its
// "aggregated" feature (JSON and the HTML page's data carry them), are
// written as N and left out.
std::vector<std::string> outputs(const std::vector<std::pair<std::string, std::vector<std::string>>>& commands,
                                 const std::string& out) {
  std::vector<std::string> results;
  for (const auto& [name, args] : commands) {
    std::filesystem::remove(out);
    RunResult r = memtrack(args);
    EXPECT_FALSE(r.timed_out) << name;
    static const std::regex version(R"(("artifact_format_version":\s*)\d+)");
    static const std::regex aggregated(R"(,\s*"aggregated")");
    results.push_back(std::regex_replace(
        std::regex_replace("exit " + std::to_string(r.exit_code()) + "\n" + r.err + "\n" + slurp(out), version, "$1N"),
        aggregated, ""));
  }
  return results;
}

// A recording, then both layouts of it at the same name, each analysed the
// same ways: the outputs must be equal.
void expect_same_outputs(const TempDir& dir, const std::string& recorded) {
  const std::string artifact = dir.file("layout.zst"), out = dir.file("out");
  const auto commands = report_commands(artifact, out);

  write_rounded_records(recorded, artifact);
  ASSERT_EQ(read_artifact_header(artifact).format_version, kRecordsFormatVersion);
  const std::vector<std::string> records = outputs(commands, out);

  RunResult converted = memtrack({"convert", recorded, dir.file("compact.zst")});
  ASSERT_EQ(converted.exit_code(), 0) << converted.err;
  std::filesystem::rename(dir.file("compact.zst"), artifact);
  ASSERT_EQ(read_artifact_header(artifact).format_version, kFormatVersion);
  const std::vector<std::string> compact = outputs(commands, out);

  for (size_t i = 0; i < commands.size(); ++i)
    EXPECT_TRUE(records[i] == compact[i]) << commands[i].first << " differs between the layouts:\n--- records\n"
                                          << records[i].substr(0, 4000) << "\n--- compact\n"
                                          << compact[i].substr(0, 4000);
  EXPECT_GT(std::filesystem::file_size(recorded), std::filesystem::file_size(artifact))
      << "the compact artifact should be smaller than the records layout's";
}

// A recording and its aggregated form (`convert --aggregate`, what `record
// --aggregate` writes) at the same name: every output but those that need the
// events must be equal; those are refused by name.
void expect_same_aggregated_outputs(const TempDir& dir, const std::string& recorded) {
  const std::string artifact = dir.file("layout.zst"), out = dir.file("out");
  std::vector<std::pair<std::string, std::vector<std::string>>> commands;
  for (auto& command : report_commands(artifact, out))
    if (command.first != "json --at 0.001") commands.push_back(command);
  commands.push_back({"diff", {"diff", "--format", "json", "-o", out, artifact, artifact}});

  std::filesystem::copy_file(recorded, artifact, std::filesystem::copy_options::overwrite_existing);
  const std::vector<std::string> whole = outputs(commands, out);

  RunResult converted = memtrack({"convert", "--aggregate", recorded, dir.file("aggregated.zst")});
  ASSERT_EQ(converted.exit_code(), 0) << converted.err;
  std::filesystem::rename(dir.file("aggregated.zst"), artifact);
  const std::vector<std::string> aggregated = outputs(commands, out);

  for (size_t i = 0; i < commands.size(); ++i)
    EXPECT_TRUE(whole[i] == aggregated[i]) << commands[i].first << " differs when aggregated:\n--- whole\n"
                                           << whole[i].substr(0, 4000) << "\n--- aggregated\n"
                                           << aggregated[i].substr(0, 4000);
  for (std::vector<std::string> refused : {std::vector<std::string>{"report", "--at", "0.001", artifact},
                                           std::vector<std::string>{"report", "--from", "0.001", artifact},
                                           std::vector<std::string>{"report", "--pid", "1", artifact}}) {
    RunResult r = memtrack(refused);
    EXPECT_NE(r.exit_code(), 0) << refused[1];
    EXPECT_NE(r.err.find(refused[1] + " needs the recording's events"), std::string::npos) << r.err;
  }
  RunResult again = memtrack({"convert", artifact, dir.file("again.zst")});
  EXPECT_NE(again.exit_code(), 0) << "an aggregated artifact cannot give back its events";
}

Recorded record_records_layout(const TempDir& dir, const std::vector<std::string>& command,
                               std::vector<std::string> options = {}) {
  options.push_back("--records-layout");
  Recorded r = record_command(dir, command, std::chrono::seconds(120), {}, options);
  EXPECT_EQ(r.run.exit_code(), 0) << r.run.err;
  return r;
}

class CompactLayout : public ::testing::Test {
 protected:
  void SetUp() override { MEMTRACK_REQUIRE_BPF_PRIVILEGES(); }
  TempDir dir_;
};

TEST_F(CompactLayout, ProcessesAndThreadsReportTheSameOnBothPaths) {
  for (std::vector<std::string> options : {std::vector<std::string>{}, std::vector<std::string>{"--uprobes"}}) {
    SCOPED_TRACE(options.empty() ? "interposer" : "uprobes");
    record_records_layout(dir_, {FX_LIBC, "all"}, options);
    expect_same_outputs(dir_, dir_.file("a.zst"));
  }
}

TEST_F(CompactLayout, CallPathsReportTheSame) {
  record_records_layout(dir_, {FX_CALLPATHS, "figures"});
  expect_same_outputs(dir_, dir_.file("a.zst"));
}

TEST_F(CompactLayout, Python3ReportsTheSame) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "SKIPPED: no /usr/bin/python3";
  record_records_layout(dir_, {"/usr/bin/env", "PYTHONMALLOC=malloc", "/usr/bin/python3", PYTHON_WORKLOAD});
  expect_same_outputs(dir_, dir_.file("a.zst"));
}

TEST_F(CompactLayout, DiffsReportTheSame) {
  // Two recordings of different programs, diffed in each layout.
  record_records_layout(dir_, {FX_CALLPATHS, "figures"});
  std::filesystem::rename(dir_.file("a.zst"), dir_.file("base.zst"));
  record_records_layout(dir_, {FX_LIBC, "all"});
  const std::string base = dir_.file("layout-base.zst"), head = dir_.file("layout-head.zst"), out = dir_.file("out");
  std::vector<std::pair<std::string, std::vector<std::string>>> commands;
  for (const char* format : {"text", "markdown", "json", "html"})
    commands.push_back({format, {"diff", "--format", format, "--fail-if", "peak>+5%", "-o", out, base, head}});
  write_rounded_records(dir_.file("base.zst"), base);
  write_rounded_records(dir_.file("a.zst"), head);
  const std::vector<std::string> records = outputs(commands, out);
  ASSERT_EQ(memtrack({"convert", dir_.file("base.zst"), dir_.file("c1.zst")}).exit_code(), 0);
  ASSERT_EQ(memtrack({"convert", dir_.file("a.zst"), dir_.file("c2.zst")}).exit_code(), 0);
  std::filesystem::rename(dir_.file("c1.zst"), base);
  std::filesystem::rename(dir_.file("c2.zst"), head);
  const std::vector<std::string> compact = outputs(commands, out);
  for (size_t i = 0; i < commands.size(); ++i)
    EXPECT_TRUE(records[i] == compact[i]) << commands[i].first << " differs between the layouts:\n--- records\n"
                                          << records[i].substr(0, 4000) << "\n--- compact\n"
                                          << compact[i].substr(0, 4000);
}

// record --aggregate (issue 28) keeps figures instead of events: every
// report of it is the whole recording's.
TEST_F(CompactLayout, AggregatedRecordingsReportTheSame) {
  for (std::vector<std::string> options : {std::vector<std::string>{}, std::vector<std::string>{"--uprobes"}}) {
    SCOPED_TRACE(options.empty() ? "interposer" : "uprobes");
    options.insert(options.begin(), "-q");
    RunResult r = memtrack(with_run_options(
        [&] {
          std::vector<std::string> args = {"record", "-o", dir_.file("a.zst")};
          args.insert(args.end(), options.begin(), options.end());
          args.insert(args.end(), {"--", FX_LIBC, "all"});
          return args;
        }()));
    ASSERT_EQ(r.exit_code(), 0) << r.describe();
    expect_same_aggregated_outputs(dir_, dir_.file("a.zst"));
  }
  RunResult r = memtrack(with_run_options({"record", "-q", "-o", dir_.file("b.zst"), "--", FX_CALLPATHS, "figures"}));
  ASSERT_EQ(r.exit_code(), 0) << r.describe();
  expect_same_aggregated_outputs(dir_, dir_.file("b.zst"));
}

TEST_F(CompactLayout, RecordsLayoutComesBackFromACompactRecording) {
  // Recorded compact (the default), converted to the seed's layout: the
  // same outputs, format_version 2, and `dump` of the compact file names
  // blocks where the converted one shows their numbers as addresses.
  RunResult recorded = memtrack(with_run_options({"record", "-q", "-o", dir_.file("a.zst"), "--", FX_CALLPATHS, "figures"}));
  ASSERT_EQ(recorded.exit_code(), 0) << recorded.describe();
  ASSERT_EQ(read_artifact_header(dir_.file("a.zst")).format_version, kFormatVersion);
  const std::string artifact = dir_.file("layout.zst"), out = dir_.file("out");
  const auto commands = report_commands(artifact, out);
  std::filesystem::copy_file(dir_.file("a.zst"), artifact);
  const std::vector<std::string> compact = outputs(commands, out);
  std::filesystem::remove(artifact);
  ASSERT_EQ(memtrack({"convert", "--layout", "records", dir_.file("a.zst"), artifact}).exit_code(), 0);
  ASSERT_EQ(read_artifact_header(artifact).format_version, kRecordsFormatVersion);
  const std::vector<std::string> records = outputs(commands, out);
  for (size_t i = 0; i < commands.size(); ++i) EXPECT_TRUE(records[i] == compact[i]) << commands[i].first;

  RunResult dump = memtrack({"dump", dir_.file("a.zst")});
  ASSERT_EQ(dump.exit_code(), 0) << dump.err;
  EXPECT_NE(dump.out.find("\"type\":\"Malloc\""), std::string::npos);
  EXPECT_NE(dump.out.find("\"block\":1,"), std::string::npos) << dump.out.substr(0, 2000);
}

}  // namespace
}  // namespace memtrack::testing
