// Python frames in call paths, end to end on Debian's /usr/bin/python3.11
// (non-PIE, no .symtab) recorded by the interposer: the script
// tests/fixtures/python/allocations.py allocates at lines marked
// "@line:NAME" and keeps every block until it exits without finalizing, so
// the bytes live at exit per Python line are known twice: from memtrack's
// report (each site by its innermost Python frame) and from CPython's own
// tracemalloc, run on the same script in a separate process (tracing in the
// recorded process would add tracemalloc's own bookkeeping to the lines).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "recording.h"

namespace memtrack::testing {
namespace {

using nlohmann::json;

constexpr const char* kPython = "/usr/bin/python3.11";
const std::string kScript = std::string(FX_SOURCE_DIR) + "/python/allocations.py";

// The script's lines marked "@KIND:NAME", by name: "line" marks a line
// that allocates, "call" one that calls what does.
std::map<std::string, int> markers(const std::string& kind = "line") {
  std::map<std::string, int> lines;
  std::ifstream in(kScript);
  const std::regex marker("@" + kind + R"(:([a-z_]+))");
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    std::smatch m;
    if (std::regex_search(line, m, marker)) lines[m[1]] = number;
  }
  return lines;
}

bool python_311_here() {
  RunResult version = run_process({kPython, "-c", "import sys; print(sys.version_info[:2] == (3, 11))"},
                                  std::chrono::seconds(30));
  return version.exited() && version.exit_code() == 0 && version.out.find("True") != std::string::npos;
}

#define REQUIRE_PYTHON_311()                                                   \
  do {                                                                         \
    MEMTRACK_REQUIRE_BPF_PRIVILEGES();                                         \
    if (!python_311_here()) GTEST_SKIP() << kPython << " (CPython 3.11) missing"; \
  } while (0)

struct Reported {
  Recorded recorded;
  json report;
};

// The JSON report of the sites that leak most (the script's lines leak
// 100 KB or more each; the other sites, the interpreter's start, are many
// and small: listing them all takes a minute on a loaded machine).
json leak_report(const TempDir& dir) {
  RunResult report = run_process(
      {MEMTRACK_BIN, "report", "--format", "json", "--by", "leaked", "--top", "300", dir.file("a.zst")},
      std::chrono::seconds(120));
  EXPECT_EQ(report.exit_code(), 0) << report.describe();
  return report.exited() && report.exit_code() == 0 ? json::parse(report.out) : json();
}

Reported record_script(const TempDir& dir, const std::vector<std::string>& arguments,
                       const std::vector<std::pair<std::string, std::string>>& env = {{"PYTHONMALLOC", "malloc"}}) {
  std::vector<std::string> command = {kPython, kScript};
  command.insert(command.end(), arguments.begin(), arguments.end());
  Reported r;
  r.recorded = record_command(dir, command, std::chrono::seconds(120), {.cwd = "", .env = env});
  r.report = leak_report(dir);
  return r;
}

// Bytes live at exit per "file:line" of each site's innermost Python frame.
std::map<std::string, uint64_t> leaked_by_line(const json& report) {
  std::map<std::string, uint64_t> lines;
  for (const json& site : report["profile"]["sites"])
    for (const json& frame : site["frames"])
      if (frame["module"] == "[python]") {
        lines[frame["file"].get<std::string>() + ":" + std::to_string(frame["line"].get<int>())] +=
            site["costs"]["leaked_bytes"].get<uint64_t>();
        break;
      }
  return lines;
}

// tracemalloc's bytes live per "file:line" (the script prints them).
std::map<std::string, uint64_t> tracemalloc_by_line() {
  RunResult run = run_process({kPython, kScript, "--tracemalloc"}, std::chrono::seconds(120),
                              {.cwd = "", .env = {{"PYTHONMALLOC", "malloc"}}});
  EXPECT_EQ(run.exit_code(), 0) << run.describe();
  std::map<std::string, uint64_t> lines;
  json printed = json::parse(run.out);
  for (const auto& [where, bytes] : printed.items()) lines[where] = bytes.get<uint64_t>();
  return lines;
}

// Within 1 % or 1 KiB: both count the sizes asked of malloc for the blocks
// the line made and kept, but in two runs of the script; the interpreter's
// own caches (specialization, dict key sharing) may differ by a few blocks.
bool close_enough(uint64_t a, uint64_t b) {
  uint64_t difference = a > b ? a - b : b - a;
  return difference <= 1024 || difference * 100 <= std::max(a, b);
}

TEST(PythonFrames, PerLineBytesAgreeWithTracemalloc) {
  REQUIRE_PYTHON_311();
  TempDir dir;
  Reported r = record_script(dir, {});
  ASSERT_EQ(r.recorded.run.exit_code(), 0) << r.recorded.run.describe();
  ASSERT_FALSE(r.report.is_null());
  std::map<std::string, uint64_t> memtrack = leaked_by_line(r.report);
  std::map<std::string, uint64_t> tracemalloc = tracemalloc_by_line();
  for (const auto& [name, line] : markers()) {
    std::string where = kScript + ":" + std::to_string(line);
    ASSERT_TRUE(tracemalloc.contains(where)) << name;
    EXPECT_GT(tracemalloc[where], 100'000u) << name << ": the fixture's lines allocate 100 KB or more";
    EXPECT_TRUE(close_enough(memtrack[where], tracemalloc[where]))
        << "@line:" << name << " (" << where << "): memtrack " << memtrack[where] << " B, tracemalloc "
        << tracemalloc[where] << " B";
  }
}

TEST(PythonFrames, PathsNestPythonFramesInsideTheEvalLoop) {
  REQUIRE_PYTHON_311();
  TempDir dir;
  Reported r = record_script(dir, {});
  ASSERT_FALSE(r.report.is_null()) << r.recorded.run.describe();
  int nested_line = markers()["nested"];
  bool found = false;
  for (const json& site : r.report["profile"]["sites"]) {
    const json& frames = site["frames"];
    size_t first_python = frames.size();
    for (size_t i = 0; i < frames.size(); ++i)
      if (frames[i]["module"] == "[python]") {
        first_python = i;
        break;
      }
    if (first_python == frames.size() || frames[first_python]["file"] != kScript ||
        frames[first_python]["line"] != nested_line)
      continue;
    found = true;
    // nested(20) .. nested(0), then work, main, <module>, each a frame with
    // its file; the interpreter's eval loop right outside them.
    std::vector<std::string> python;
    size_t i = first_python;
    for (; i < frames.size() && frames[i]["module"] == "[python]"; ++i)
      python.push_back(frames[i]["function"].get<std::string>());
    ASSERT_EQ(python.size(), 24u) << frames.dump(1);
    for (size_t n = 0; n < 21; ++n) EXPECT_EQ(python[n], "nested (allocations.py)");
    EXPECT_EQ(python[21], "work (allocations.py)");
    EXPECT_EQ(python[22], "main (allocations.py)");
    EXPECT_EQ(python[23], "<module> (allocations.py)");
    ASSERT_LT(i, frames.size());
    EXPECT_EQ(frames[i]["function"], "_PyEval_EvalFrameDefault");
    EXPECT_EQ(frames[first_python]["label"], "nested (allocations.py:" + std::to_string(nested_line) + ")");
    // Native frames inside: the interpreter's allocation of the bytearray.
    EXPECT_GT(first_python, 0u);
    EXPECT_EQ(site["allocating_function"], "nested (allocations.py)");
  }
  EXPECT_TRUE(found) << "no site allocates at @line:nested";
}

// The innermost Python frame of `report`'s site allocating at `marker`'s
// line, and the labels of the Python frames outside it (innermost first).
std::vector<std::string> python_path_of(const json& report, const std::string& marker) {
  int line = markers()[marker];
  for (const json& site : report["profile"]["sites"]) {
    std::vector<std::string> python;
    for (const json& frame : site["frames"])
      if (frame["module"] == "[python]") python.push_back(frame["label"].get<std::string>());
    for (const json& frame : site["frames"])
      if (frame["module"] == "[python]") {
        if (frame["file"] == kScript && frame["line"] == line) return python;
        break;
      }
  }
  return {};
}

// A generator's frame lives in its object, not on the data stack; a
// thread's frames start at threading's bootstrap.
TEST(PythonFrames, GeneratorsAndThreadsHaveTheirFrames) {
  REQUIRE_PYTHON_311();
  TempDir dir;
  Reported r = record_script(dir, {});
  ASSERT_EQ(r.recorded.run.exit_code(), 0) << r.recorded.run.describe();
  auto line = [](const char* marker) { return std::to_string(markers()[marker]); };
  std::vector<std::string> generator = python_path_of(r.report, "generator");
  ASSERT_GE(generator.size(), 4u);
  EXPECT_EQ(generator[0], "from_generator (allocations.py:" + line("generator") + ")");
  EXPECT_TRUE(generator[1].starts_with("work (allocations.py:")) << generator[1];
  std::vector<std::string> thread = python_path_of(r.report, "thread");
  ASSERT_GE(thread.size(), 4u);
  EXPECT_EQ(thread[0], "in_thread (allocations.py:" + line("thread") + ")");
  EXPECT_TRUE(thread[1].starts_with("Thread.run (threading.py:")) << thread[1];
  EXPECT_TRUE(thread.back().starts_with("Thread._bootstrap (threading.py:")) << thread.back();
}

// A fork()ed multiprocessing child and an exec()ed subprocess run the same
// work: each line's bytes come three times (the fork child's own blocks;
// what it inherited was allocated by the parent).
// two_calls() allocates two bytearrays on one line: two bytecode
// instructions, one native path. Paths are told apart by line, as every
// output shows them: one definition (its instruction is the first one's,
// which the report gives the same line), not one per instruction.
TEST(PythonFrames, OneLinesInstructionsMakeOnePath) {
  REQUIRE_PYTHON_311();
  TempDir dir;
  Reported r = record_script(dir, {});
  ASSERT_EQ(r.recorded.run.exit_code(), 0) << r.recorded.run.describe();
  RunResult dump = run_process({MEMTRACK_BIN, "dump", dir.file("a.zst")}, std::chrono::seconds(120));
  ASSERT_EQ(dump.exit_code(), 0) << dump.describe();
  std::vector<json> records;
  std::istringstream lines(dump.out);
  for (std::string line; std::getline(lines, line);) records.push_back(json::parse(line));
  std::set<uint64_t> two_calls;  // its code object's identity
  for (const json& record : records)
    if (record["type"] == "PythonCode" && record["name"] == "two_calls")
      two_calls.insert(std::stoull(record["code_id"].get<std::string>(), nullptr, 16));
  ASSERT_FALSE(two_calls.empty()) << "no PythonCode record names two_calls";
  // Definitions whose innermost Python frame runs two_calls, by their native
  // chain and the Python frames outside it.
  std::map<std::string, int> definitions;
  for (const json& record : records) {
    if (record["type"] != "Stack" || !record.contains("python_frames")) continue;
    const json& python = record["python_frames"];
    if (python.size() < 2 || !two_calls.contains(python[0].get<uint64_t>())) continue;
    json outer = json::array();
    for (size_t i = 2; i < python.size(); ++i) outer.push_back(python[i]);
    ++definitions[record["chain"].dump() + " " + outer.dump()];
  }
  ASSERT_FALSE(definitions.empty()) << "no definition allocates in two_calls";
  for (const auto& [path, count] : definitions) EXPECT_EQ(count, 1) << "defined " << count << " times: " << path;
  EXPECT_TRUE(close_enough(leaked_by_line(r.report)[kScript + ":" + std::to_string(markers()["two_calls"])],
                           250'000))
      << "two_calls' line keeps its two bytearrays (and a tuple)";
}

// Sum of the bytes live at exit of the sites one of whose Python frames is
// at the line marked `kind`:`name`.
uint64_t leaked_through(const json& report, const std::string& kind, const std::string& name) {
  const std::string label = "(allocations.py:" + std::to_string(markers(kind)[name]) + ")";
  uint64_t bytes = 0;
  for (const json& site : report["profile"]["sites"])
    for (const json& frame : site["frames"])
      if (frame["module"] == "[python]" && frame["label"].get<std::string>().ends_with(label)) {
        bytes += site["costs"]["leaked_bytes"].get<uint64_t>();
        break;
      }
  return bytes;
}

// outer() calls the same 7 frames deep chain from two lines, alternately:
// at each allocation the frames inside are as the last one found them, and
// only outer's line tells the paths apart (the interposer mixes the frames
// found unchanged once, outermost first).
TEST(PythonFrames, AnOuterFramesLineTellsPathsApart) {
  REQUIRE_PYTHON_311();
  TempDir dir;
  Reported r = record_script(dir, {});
  ASSERT_EQ(r.recorded.run.exit_code(), 0) << r.recorded.run.describe();
  for (const auto& [kind, name, bytes] : {std::tuple<std::string, std::string, uint64_t>{"call", "outer_a", 300'000},
                                           {"call", "outer_b", 600'000},
                                           {"line", "leaf", 900'000}})
    EXPECT_TRUE(close_enough(leaked_through(r.report, kind, name), bytes))
        << kind << ":" << name << ": " << leaked_through(r.report, kind, name) << " B, not " << bytes;
}

TEST(PythonFrames, ChildProcessesHaveTheirPythonFrames) {
  REQUIRE_PYTHON_311();
  TempDir dir;
  Reported r = record_script(dir, {"--child"});
  ASSERT_EQ(r.recorded.run.exit_code(), 0) << r.recorded.run.describe();
  ASSERT_FALSE(r.report.is_null());
  EXPECT_EQ(r.report["processes"].size(), 3u);
  std::map<std::string, uint64_t> memtrack = leaked_by_line(r.report);
  for (const char* name : {"big_list", "big_bytes", "nested"}) {
    std::string where = kScript + ":" + std::to_string(markers()[name]);
    std::map<std::string, uint64_t> tracemalloc = tracemalloc_by_line();
    EXPECT_TRUE(close_enough(memtrack[where], 3 * tracemalloc[where]))
        << name << ": memtrack " << memtrack[where] << " B, tracemalloc (one process) " << tracemalloc[where] << " B";
  }
}

TEST(PythonFrames, EveryOutputNamesThem) {
  REQUIRE_PYTHON_311();
  TempDir dir;
  Reported r = record_script(dir, {});
  ASSERT_EQ(r.recorded.run.exit_code(), 0) << r.recorded.run.describe();
  for (const char* format : {"text", "folded", "speedscope", "html", "pprof"}) {
    std::string out = dir.file(std::string("out.") + format);
    RunResult report = run_process({MEMTRACK_BIN, "report", "--format", format, "-o", out, dir.file("a.zst")},
                                   std::chrono::seconds(120));
    ASSERT_EQ(report.exit_code(), 0) << format << ": " << report.describe();
    std::ifstream in(out, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (std::string(format) == "pprof") {  // gzip'ed protobuf: its string table
      ASSERT_EQ(run_process({"/bin/sh", "-c", "gzip -dc < '" + out + "' > '" + out + ".raw'"}, std::chrono::seconds(60))
                    .exit_code(),
                0);
      std::ifstream raw(out + ".raw", std::ios::binary);
      bytes.assign((std::istreambuf_iterator<char>(raw)), std::istreambuf_iterator<char>());
    }
    EXPECT_NE(bytes.find("big_list (allocations.py"), std::string::npos) << format;
    EXPECT_NE(bytes.find("many_strings (allocations.py"), std::string::npos) << format;
  }
}

TEST(PythonFrames, WithoutPythonMallocTheReportSaysWhatIsMissing) {
  REQUIRE_PYTHON_311();
  TempDir dir;
  Reported r = record_script(dir, {}, {});
  ASSERT_EQ(r.recorded.run.exit_code(), 0) << r.recorded.run.describe();
  std::string warnings = r.report["warnings"].dump();
  EXPECT_NE(warnings.find("without PYTHONMALLOC=malloc"), std::string::npos) << warnings;
  // pymalloc leaves the big blocks to malloc: those lines still have frames.
  std::string where = kScript + ":" + std::to_string(markers()["big_list"]);
  EXPECT_GE(leaked_by_line(r.report)[where], 1'600'000u);
}

// `diff` matches Python frames by function and file: code object ids and
// instructions differ between the two runs, the key does not.
TEST(PythonFrames, DiffMatchesThemByFunctionAndFile) {
  REQUIRE_PYTHON_311();
  TempDir base_dir, head_dir;
  Reported base = record_script(base_dir, {});
  Reported head = record_script(head_dir, {"--double"});
  ASSERT_EQ(base.recorded.run.exit_code(), 0) << base.recorded.run.describe();
  ASSERT_EQ(head.recorded.run.exit_code(), 0) << head.recorded.run.describe();
  RunResult diff = run_process({MEMTRACK_BIN, "diff", "--format", "json", "--by", "leaked", base_dir.file("a.zst"),
                                head_dir.file("a.zst")},
                               std::chrono::seconds(120));
  ASSERT_TRUE(diff.exited()) << diff.describe();
  json j = json::parse(diff.out);
  const json& top = j["sites"]["top"];
  ASSERT_FALSE(top.empty()) << diff.out.substr(0, 2000);
  // The one real change, 1.6 MB more at big_list's line, first.
  EXPECT_EQ(top[0]["status"], "matched") << top[0].dump(1);
  EXPECT_EQ(top[0]["allocating_function"], "big_list (allocations.py)") << top[0].dump(1);
  json python_key = nullptr;  // the key's innermost Python frame
  for (const json& k : top[0]["key"])
    if (k["file"] == "allocations.py") {
      python_key = k;
      break;
    }
  EXPECT_EQ(python_key["function"], "big_list") << top[0]["key"].dump(1);
  EXPECT_EQ(python_key["module"], "");
  EXPECT_EQ(top[0]["cost"]["change"].get<int64_t>(), 1'600'000) << top[0].dump(1);
  // No Python site is new or gone.
  for (const json& site : top) {
    if (site["allocating_function"].get<std::string>().find("(allocations.py)") != std::string::npos) {
      EXPECT_EQ(site["status"], "matched") << site.dump(1);
    }
  }
}

// An interpreter without a layout table: native frames, and a note.
TEST(PythonFrames, OtherVersionsAreRefusedWithANote) {
  MEMTRACK_REQUIRE_BPF_PRIVILEGES();
  std::string python312 = std::string(getenv("HOME") ? getenv("HOME") : "/root") + "/.pyenv/versions/3.12.1/bin/python3.12";
  if (!std::filesystem::exists(python312)) GTEST_SKIP() << python312 << " missing";
  TempDir dir;
  Recorded recorded = record_command(dir, {python312, kScript}, std::chrono::seconds(120), {.cwd = "", .env = {{"PYTHONMALLOC", "malloc"}}});
  ASSERT_EQ(recorded.run.exit_code(), 0) << recorded.run.describe();
  json j = leak_report(dir);
  EXPECT_NE(j["warnings"].dump().find("cannot read (supported: 3.11)"), std::string::npos) << j["warnings"].dump();
  EXPECT_TRUE(leaked_by_line(j).empty());
}

}  // namespace
}  // namespace memtrack::testing
