// memtrack's exit statuses, option checks and untrusted files, through the
// binary. Artifacts are written with the format library; every run has a
// deadline, so a command that hangs (a FIFO opened for reading) fails the
// test instead of blocking it.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <utility>
#include <string>
#include <vector>

#include "cli/exit_status.h"
#include "format/artifact.h"
#include "module/module_elf.h"
#include "support/build_file.h"
#include "support/test_support.h"

namespace memtrack::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr auto kDeadline = 20s;

// The statuses README.md documents.
constexpr int kOk = 0, kDamaged = 1, kUsage = 2, kNoOutput = 3, kBudgetBroken = 4;
constexpr int kRecordFailed = 125, kCannotExecute = 126, kNotFound = 127;

RunResult memtrack(std::vector<std::string> args) {
  args.insert(args.begin(), MEMTRACK_BIN);
  return run_process(args, kDeadline);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The text report wraps long lines at 80 columns: whitespace runs as one space.
std::string flat(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool space = c == ' ' || c == '\n';
    if (!space || (!out.empty() && out.back() != ' ')) out += space ? ' ' : c;
  }
  return out;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

Event event(EventType type, uint64_t timestamp) {
  Event e;
  e.type = type;
  e.pid = e.tid = 100;
  e.timestamp = timestamp;
  return e;
}

// A mapping of `path` at 0x400000 and an allocation whose call path has a
// frame in it: a report symbolizes that file.
std::vector<Event> allocation_in(const std::string& path, const std::vector<uint8_t>& build_id) {
  std::vector<Event> events;
  auto image = std::make_shared<ProcessImage>();
  image->path = "/usr/bin/app";
  image->comm = "app";
  image->argv = {"app"};
  events.push_back(event(EventType::Exec, 1000));
  events.back().image = image;
  auto mapping = std::make_shared<MappingInfo>();
  mapping->len = 0x1000;
  mapping->prot = 5;  // r-x
  mapping->path = path;
  mapping->build_id = build_id;
  if (build_id.empty()) mapping->dev = 0x800001, mapping->ino = 42;
  events.push_back(event(EventType::Mapping, 1100));
  events.back().addr = 0x400000;
  events.back().mapping = mapping;
  auto stack = std::make_shared<StackDefinition>();
  stack->hash = 0xfeed;
  stack->chain = {0x400100, 0x400200};
  events.push_back(event(EventType::Stack, 1200));
  events.back().stack = stack;
  events.push_back(event(EventType::Malloc, 1300));
  events.back().addr = 0x10000;
  events.back().size = 64;
  events.back().stack_hash = stack->hash;
  events.push_back(event(EventType::Exit, 1400));
  return events;
}

void write_artifact(const std::string& path, const std::vector<Event>& events) {
  ArtifactHeader header;
  header.command = {"app"};
  header.start_monotonic_ns = 900;
  header.page_size = 4096;
  ArtifactWriter writer(path, header);
  writer.append(events);
  writer.finish({});
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    write_artifact(intact_, allocation_in("/nonexistent/libapp.so", {1, 2, 3, 4}));
    // Cut inside the event frame: truncated, not finalized.
    const std::string bytes = read_file(intact_);
    write_file(truncated_, bytes.substr(0, bytes.size() * 2 / 3));
    ASSERT_EQ(mkfifo(fifo_.c_str(), 0600), 0);
  }

  // Every run's stderr and stdout when an expectation fails.
  static std::string context(const RunResult& r) { return r.describe(); }

  TempDir dir_;
  const std::string intact_ = dir_.file("intact.zst");
  const std::string truncated_ = dir_.file("truncated.zst");
  const std::string fifo_ = dir_.file("fifo");
};

// ---- report ----

TEST_F(Cli, ReportIntactIsOk) {
  const RunResult r = memtrack({"report", intact_});
  EXPECT_EQ(r.exit_code(), kOk) << context(r);
  EXPECT_NE(r.out.find("app"), std::string::npos) << context(r);
}

TEST_F(Cli, ReportTruncatedIsDamagedButReported) {
  const RunResult r = memtrack({"report", truncated_});
  EXPECT_EQ(r.exit_code(), kDamaged) << context(r);
  EXPECT_NE(r.out.find("not finalized"), std::string::npos) << context(r);
  // Folded stacks cannot carry the warning: stderr does.
  const RunResult folded = memtrack({"report", "--format", "folded", truncated_});
  EXPECT_EQ(folded.exit_code(), kDamaged) << context(folded);
  EXPECT_NE(folded.err.find("warning"), std::string::npos) << context(folded);
}

// The HTML page embeds the JSON report's document as is; a damaged input
// gives the page and status 1, its warning on the page.
TEST_F(Cli, ReportHtmlEmbedsTheJsonReport) {
  for (const std::string& input : {intact_, truncated_}) {
    const std::string page_path = dir_.file("report.html");
    const RunResult html = memtrack({"report", "--format", "html", "-o", page_path, input});
    const RunResult json = memtrack({"report", "--format", "json", input});
    EXPECT_EQ(html.exit_code(), json.exit_code()) << context(html);
    const std::string page = read_file(page_path);
    const std::string open = "<script type=\"application/json\" id=\"memtrack-data\">";
    size_t start = page.find(open);
    ASSERT_NE(start, std::string::npos) << page.substr(0, 300);
    start += open.size();
    nlohmann::json data = nlohmann::json::parse(page.substr(start, page.find("</script>", start) - start));
    EXPECT_EQ(data["report"], nlohmann::json::parse(json.out)) << input;
    EXPECT_EQ(data["trees"]["top-down"][1][0], input == intact_ ? 64 : 0) << "bytes allocated at the root";
  }
}

// --from/--to are seconds to the nanosecond: 1.001 is 1,001,000,000 ns, not
// the 1,000,999,999 that truncating 1.001 * 1e9 (1000999999.9999999) gave.
// The HTML page's window commands name bucket edges this way.
TEST_F(Cli, ReportFromAndToAreExactNanoseconds) {
  const std::string artifact = dir_.file("edges.zst");
  std::vector<Event> events = allocation_in("/nonexistent/libapp.so", {1, 2, 3, 4});
  events.pop_back();  // the Exit: allocations follow
  for (uint64_t ns : {1'000'999'999ULL, 1'001'000'000ULL, 1'001'000'001ULL}) {
    events.push_back(events[events.size() - 1]);
    events.back().timestamp = 900 + ns;
    events.back().addr += 0x100;
  }
  events.push_back(event(EventType::Exit, 900 + 1'100'000'000));
  write_artifact(artifact, events);
  const RunResult from = memtrack({"report", "--format", "json", "--from", "1.001", artifact});
  ASSERT_EQ(from.exit_code(), kOk) << context(from);
  EXPECT_EQ(nlohmann::json::parse(from.out)["profile"]["totals"]["allocations"], 2) << context(from);
  const RunResult to = memtrack({"report", "--format", "json", "--from", "1.000999999", "--to", "1.001", artifact});
  ASSERT_EQ(to.exit_code(), kOk) << context(to);
  EXPECT_EQ(nlohmann::json::parse(to.out)["profile"]["totals"]["allocations"], 2) << context(to);
}

TEST_F(Cli, ReportUsageError) {
  const RunResult r = memtrack({"report", "--by", "nonsense", intact_});
  EXPECT_EQ(r.exit_code(), kUsage) << context(r);
  EXPECT_EQ(memtrack({"report"}).exit_code(), kUsage);
}

TEST_F(Cli, ReportWithoutInputOrOutputProducesNothing) {
  EXPECT_EQ(memtrack({"report", dir_.file("absent.zst")}).exit_code(), kNoOutput);
  const RunResult unwritable = memtrack({"report", "-o", dir_.file("no/such/dir/out.txt"), intact_});
  EXPECT_EQ(unwritable.exit_code(), kNoOutput) << context(unwritable);
}

TEST_F(Cli, ReportOfAFifoDoesNotWaitForAWriter) {
  const RunResult r = memtrack({"report", fifo_});
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code(), kNoOutput) << context(r);
  EXPECT_NE(r.err.find(fifo_ + ": not a regular file (a FIFO)"), std::string::npos) << context(r);
}

TEST_F(Cli, SuppressionsFromADeviceAreRefusedAtOnce) {
  // /dev/zero used to be read until memory ran out.
  for (const std::string& file : {std::string("/dev/zero"), fifo_}) {
    const RunResult r = memtrack({"report", "--suppressions", file, intact_});
    EXPECT_FALSE(r.timed_out) << file;
    EXPECT_EQ(r.exit_code(), kNoOutput) << context(r);
    EXPECT_NE(r.err.find("suppressions file " + file + ": not a regular file"), std::string::npos) << context(r);
  }
}

// A Mapping record naming a FIFO: the report goes on without that file
// (--verbose: the default report counts warnings, this one lists them).
TEST_F(Cli, ReportOfAMappingNamingAFifoDoesNotHang) {
  const std::string artifact = dir_.file("fifo-mapping.zst");
  write_artifact(artifact, allocation_in(fifo_, {}));
  const RunResult r = memtrack({"report", "--verbose", artifact});
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code(), kOk) << context(r);
  EXPECT_NE(flat(r.out + r.err).find(fifo_ + ": not a regular file (a FIFO)"), std::string::npos) << context(r);
}

// --modules DIR: its metadata names files; none is read outside DIR.
TEST_F(Cli, ModulesMetadataCannotNameFilesOutsideItsDirectory) {
  const std::string modules = dir_.file("modules");
  fs::create_directories(modules);
  write_file(dir_.file("outside.eh_frame"), std::string(16, '\0'));
  write_file(dir_.file("outside.symbols.map"), "100 10 stolen_secret\n");
  fs::create_symlink(dir_.file("outside.symbols.map"), modules + "/link.symbols.map");
  nlohmann::json file = {{"path", "/nonexistent/libapp.so"}, {"status", "exported"}, {"build_id", "01020304"},
                         {"dev", nullptr}, {"ino", nullptr}, {"load_segments", nlohmann::json::array()},
                         {"eh_frame", {{"file", "../outside.eh_frame"}, {"address", 0}, {"size", 16}}},
                         {"eh_frame_hdr", nullptr}, {"debug_frame", nullptr}, {"debug_link", nullptr},
                         {"debug_file", nullptr}, {"symbols_file", "link.symbols.map"}};
  write_file(modules + "/memtrack.metadata",
             nlohmann::json{{"version", 1}, {"files", {{"k", file}}}}.dump());
  const RunResult r = memtrack({"report", "--verbose", "--modules", modules, intact_});
  EXPECT_EQ(r.exit_code(), kOk) << context(r);
  const std::string all = flat(r.out + r.err);
  EXPECT_NE(all.find(modules + "/../outside.eh_frame: refused: the name leads out of " + modules), std::string::npos)
      << context(r);
  EXPECT_NE(all.find(modules + "/link.symbols.map: refused: the name leads out of " + modules), std::string::npos)
      << context(r);
  EXPECT_EQ(all.find("stolen_secret"), std::string::npos) << context(r);
}

// ---- dump ----

// ---- diff and check ----

// One process "app ARGS" (pid 100) allocating `sizes` and leaking the last
// `leaked` of them; no call paths.
std::vector<Event> allocations(const std::vector<uint64_t>& sizes, size_t leaked) {
  std::vector<Event> events;
  auto image = std::make_shared<ProcessImage>();
  image->path = "/usr/bin/app";
  image->comm = "app";
  image->argv = {"app"};
  events.push_back(event(EventType::Exec, 1000));
  events.back().image = image;
  uint64_t t = 1100;
  for (size_t i = 0; i < sizes.size(); ++i) {
    events.push_back(event(EventType::Malloc, t++));
    events.back().addr = 0x10000 + 0x1000 * i;
    events.back().size = sizes[i];
    if (i + leaked >= sizes.size()) continue;
    events.push_back(event(EventType::Free, t++));
    events.back().addr = 0x10000 + 0x1000 * i;
  }
  events.push_back(event(EventType::Exit, t));
  return events;
}

void write_artifact_of(const std::string& path, const std::vector<std::string>& command, uint32_t format_version,
                       const std::vector<Event>& events) {
  ArtifactHeader header;
  header.format_version = format_version;
  header.command = command;
  header.start_monotonic_ns = 900;
  header.page_size = 4096;
  ArtifactWriter writer(path, header);
  writer.append(events);
  writer.finish({});
}

// Without call paths, with other commands: the totals are compared, and the
// output says why call paths are not.
TEST_F(Cli, DiffOfRecordingsWithoutStacksComparesTotals) {
  const std::string base = dir_.file("base.zst"), head = dir_.file("head.zst");
  write_artifact_of(base, {"app", "--small"}, kFormatVersion, allocations({100, 200}, 0));
  write_artifact_of(head, {"app", "--big"}, kFormatVersion, allocations({100, 200, 4000}, 1));
  const RunResult r = memtrack({"diff", "--format", "json", base, head, "--fail-if", "leaked>4KiB"});
  EXPECT_EQ(r.exit_code(), kOk) << context(r);
  const auto d = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(d.is_discarded()) << context(r);
  EXPECT_EQ(d["totals"]["allocated"]["change"], 4000);
  EXPECT_EQ(d["totals"]["alloc_calls"]["base"], 2);
  EXPECT_EQ(d["totals"]["leaked_blocks"]["head"], 1);
  EXPECT_EQ(d["totals"]["leaked"]["relative_percent"], nullptr);  // from 0
  EXPECT_EQ(d["sites"], nullptr);
  ASSERT_EQ(d["notes"].size(), 2u) << d["notes"].dump();
  EXPECT_NE(d["notes"][0].get<std::string>().find("different commands: base \"app --small\", head \"app --big\""),
            std::string::npos);
  EXPECT_NE(d["notes"][1].get<std::string>().find("neither recording has call paths"), std::string::npos);
  EXPECT_EQ(d["budgets"][0]["status"], "held");
  EXPECT_EQ(memtrack({"diff", base, head, "--fail-if", "leaked>=4000"}).exit_code(), kBudgetBroken);
  const RunResult text = memtrack({"diff", base, head});
  EXPECT_EQ(text.exit_code(), kOk) << context(text);
  EXPECT_NE(flat(text.out).find("neither recording has call paths (recorded with --no-stacks)"), std::string::npos)
      << context(text);
}

// A newer format version: said, read as far as known (a damaged input), and
// the totals still compared; a broken budget outranks the damage.
TEST_F(Cli, DiffOfDifferentFormatVersions) {
  const std::string base = dir_.file("base.zst"), head = dir_.file("head.zst");
  write_artifact_of(base, {"app"}, kRecordsFormatVersion, allocations({100}, 0));
  write_artifact_of(head, {"app"}, kFormatVersion + 1, allocations({100, 50}, 0));
  const RunResult r = memtrack({"diff", "--format", "markdown", base, head});
  EXPECT_EQ(r.exit_code(), kDamaged) << context(r);
  EXPECT_NE(r.out.find(fmt::format("different artifact format versions: base {}, head {}", kRecordsFormatVersion,
                                   kFormatVersion + 1)),
            std::string::npos)
      << context(r);
  EXPECT_NE(r.out.find("| allocated | 100 B | 150 B | **+50 B** | +50.0% |"), std::string::npos) << context(r);
  EXPECT_EQ(memtrack({"diff", base, head, "--fail-if", "allocated>+10%"}).exit_code(), kBudgetBroken);
}

TEST_F(Cli, DiffAndCheckStatuses) {
  const std::string run = dir_.file("run.zst");
  write_artifact_of(run, {"app"}, kFormatVersion, allocations({100, 200}, 1));
  EXPECT_EQ(memtrack({"check", run, "--max", "leaked<=200"}).exit_code(), kOk);
  EXPECT_EQ(memtrack({"check", run, "--max", "leaked<200"}).exit_code(), kBudgetBroken);
  EXPECT_EQ(memtrack({"check", run, "--max", "process(app).peak<=200B"}).exit_code(), kOk);
  // Errors: malformed (position and reason, nothing read), unanswerable, unreadable.
  const RunResult bad = memtrack({"check", run, "--max", "peak<=64MB"});
  EXPECT_EQ(bad.exit_code(), kUsage) << context(bad);
  EXPECT_NE(bad.err.find("--max 'peak<=64MB': at column 9: unit \"MB\": sizes are base 1024, write MiB"),
            std::string::npos)
      << context(bad);
  EXPECT_TRUE(bad.out.empty());
  EXPECT_EQ(memtrack({"check", run, "--max", "process(ghost).peak<=1"}).exit_code(), kUsage);
  EXPECT_EQ(memtrack({"check", dir_.file("absent.zst"), "--max", "peak<=1"}).exit_code(), kNoOutput);
  EXPECT_EQ(memtrack({"diff", run, dir_.file("absent.zst")}).exit_code(), kNoOutput);
  EXPECT_EQ(memtrack({"diff", run}).exit_code(), kUsage);
  EXPECT_EQ(memtrack({"diff", "--format", "xml", run, run}).exit_code(), kUsage);
  EXPECT_EQ(memtrack({"diff", "--format", "html", "-o", dir_.file("diff.html"), run, run}).exit_code(), kOk);
  EXPECT_EQ(read_file(dir_.file("diff.html")).rfind("<!DOCTYPE html>", 0), 0u);
  // A truncated recording: figures of what could be read, status 1.
  EXPECT_EQ(memtrack({"check", truncated_, "--max", "peak<=1GiB"}).exit_code(), kDamaged);
}

TEST_F(Cli, DumpStatuses) {
  const RunResult ok = memtrack({"dump", intact_});
  EXPECT_EQ(ok.exit_code(), kOk) << context(ok);
  EXPECT_NE(ok.out.find("\"type\":\"Malloc\""), std::string::npos) << context(ok);
  const RunResult damaged = memtrack({"dump", truncated_});
  EXPECT_EQ(damaged.exit_code(), kDamaged) << context(damaged);
  EXPECT_NE(damaged.err.find("warning"), std::string::npos) << context(damaged);
  EXPECT_EQ(memtrack({"dump"}).exit_code(), kUsage);
  EXPECT_EQ(memtrack({"dump", dir_.file("absent.zst")}).exit_code(), kNoOutput);
  const RunResult fifo = memtrack({"dump", fifo_});
  EXPECT_FALSE(fifo.timed_out);
  EXPECT_EQ(fifo.exit_code(), kNoOutput) << context(fifo);
}

// ---- info ----

TEST_F(Cli, InfoStatuses) {
  const RunResult ok = memtrack({"info", intact_});
  EXPECT_EQ(ok.exit_code(), kOk) << context(ok);
  EXPECT_NE(ok.out.find("intact: true"), std::string::npos) << context(ok);
  const RunResult damaged = memtrack({"info", truncated_});
  EXPECT_EQ(damaged.exit_code(), kDamaged) << context(damaged);
  EXPECT_NE(damaged.out.find("intact: false"), std::string::npos) << context(damaged);
  EXPECT_EQ(memtrack({"info", "--format", "xml", intact_}).exit_code(), kUsage);
  EXPECT_EQ(memtrack({"info", dir_.file("absent.zst")}).exit_code(), kNoOutput);
  const RunResult fifo = memtrack({"info", fifo_});
  EXPECT_FALSE(fifo.timed_out);
  EXPECT_EQ(fifo.exit_code(), kNoOutput) << context(fifo);
  EXPECT_NE(fifo.err.find("not a regular file (a FIFO)"), std::string::npos) << context(fifo);
}

// Issue 29, item 8: finalized, but the recorder could not write everything
// (disk full: 170,727 records dropped, counted in the trailer). Every reader
// exits 1 and says so; before, info and report exited 0.
TEST_F(Cli, IncompleteArtifactIsDamaged) {
  const std::string incomplete = dir_.file("incomplete.zst");
  {
    ArtifactHeader header;
    header.command = {"app"};
    ArtifactWriter writer(incomplete, header);
    writer.append(allocation_in("/nonexistent/libapp.so", {1, 2, 3, 4}));
    ArtifactTrailer trailer;
    trailer.counters = {{"write_error_records_dropped", 170727}, {"kernel_events_lost", 0}};
    writer.finish(trailer);
  }
  const std::string said = incomplete + ": incomplete: 170727 records were not written";
  const RunResult info = memtrack({"info", incomplete});
  EXPECT_EQ(info.exit_code(), kDamaged) << context(info);
  EXPECT_NE(info.out.find("intact: false"), std::string::npos) << context(info);
  EXPECT_NE(info.out.find(said), std::string::npos) << context(info);
  const RunResult report = memtrack({"report", incomplete});
  EXPECT_EQ(report.exit_code(), kDamaged) << context(report);
  EXPECT_NE(flat(report.out).find(said), std::string::npos) << context(report);
  const RunResult folded = memtrack({"report", "--format", "folded", incomplete});  // stderr says it
  EXPECT_EQ(folded.exit_code(), kDamaged) << context(folded);
  EXPECT_NE(folded.err.find(said), std::string::npos) << context(folded);
  const RunResult dump = memtrack({"dump", incomplete});
  EXPECT_EQ(dump.exit_code(), kDamaged) << context(dump);
  EXPECT_EQ(memtrack({"check", incomplete, "--max", "peak<=1GiB"}).exit_code(), kDamaged);
  EXPECT_EQ(memtrack({"diff", intact_, incomplete}).exit_code(), kDamaged);
}

// ---- export-modules ----

TEST_F(Cli, ExportModulesStatuses) {
  // This test binary, with its build id: exported.
  const std::string self = fs::read_symlink("/proc/self/exe");
  const std::vector<uint8_t> build_id = read_elf_module(self).build_id;
  ASSERT_FALSE(build_id.empty());
  const std::string artifact = dir_.file("self.zst");
  write_artifact(artifact, allocation_in(self, build_id));
  const RunResult ok = memtrack({"export-modules", artifact, dir_.file("out-ok")});
  EXPECT_EQ(ok.exit_code(), kOk) << context(ok);

  const RunResult damaged = memtrack({"export-modules", truncated_, dir_.file("out-truncated")});
  EXPECT_EQ(damaged.exit_code(), kDamaged) << context(damaged);
  EXPECT_EQ(memtrack({"export-modules", intact_}).exit_code(), kUsage);
  EXPECT_EQ(memtrack({"export-modules", dir_.file("absent.zst"), dir_.file("out-absent")}).exit_code(), kNoOutput);
}

TEST_F(Cli, ExportModulesSkipsAMappingNamingAFifo) {
  const std::string artifact = dir_.file("fifo-mapping.zst");
  write_artifact(artifact, allocation_in(fifo_, {}));
  const RunResult r = memtrack({"export-modules", artifact, dir_.file("out")});
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code(), kDamaged) << context(r);  // a file not exported
  EXPECT_NE(r.err.find(fifo_ + ": not a regular file (a FIFO); not exported"), std::string::npos) << context(r);
}

// ---- record ----

TEST_F(Cli, RecordRefusesBadValuesUpFront) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--ring-mib", "abc"}, "not a number: abc"},
      {{"--ring-mib", "3"}, "power of two"},
      {{"--ring-mib", "nan"}, "not a number"},
      {{"--stack-ring-mib", "3"}, "power of two"},
      {{"--pid", "-1"}, "--pid"},
      {{"--pid", "0"}, "--pid"},
      {{"--encode-workers", "100000"}, "--encode-workers"},
      {{"--encode-workers", "0"}, "--encode-workers"},
      {{"--stack-budget", "100"}, "--stack-budget"},
      {{"--duration", "5"}, "--duration requires --pid"},
  };
  // Guards "up front": refused before the command runs (it would leave a
  // file), not within a time a loaded machine may exceed.
  const std::string ran = dir_.file("ran");
  for (const Case& c : cases) {
    std::vector<std::string> args = {"record", "-o", dir_.file("never.zst")};
    args.insert(args.end(), c.args.begin(), c.args.end());
    args.insert(args.end(), {"--", "/usr/bin/touch", ran});
    const RunResult r = memtrack(args);
    EXPECT_EQ(r.exit_code(), kRecordFailed) << c.args[0] << " " << c.args[1] << ": " << context(r);
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args[0] << " " << c.args[1] << ": " << context(r);
    EXPECT_FALSE(fs::exists(ran)) << c.args[0] << " " << c.args[1] << ": the command ran";
    EXPECT_FALSE(fs::exists(dir_.file("never.zst")));
  }
  EXPECT_EQ(memtrack({"record"}).exit_code(), kRecordFailed);
  EXPECT_EQ(memtrack({"record", "--bogus"}).exit_code(), kRecordFailed);
  EXPECT_EQ(memtrack({"record", "--help"}).exit_code(), kOk);
  EXPECT_EQ(memtrack({"--version"}).exit_code(), kOk);
  EXPECT_EQ(memtrack({"no-such-command"}).exit_code(), kUsage);
}

TEST_F(Cli, RecordPidThatDoesNotExist) {
  // Above any pid_max (2^22): no such process.
  const RunResult r = memtrack({"record", "-o", dir_.file("none.zst"), "--pid", "2000000000"});
  EXPECT_EQ(r.exit_code(), kRecordFailed) << context(r);
  EXPECT_NE(r.err.find("no process 2000000000"), std::string::npos) << context(r);
}

// As an unprivileged user, another user's process is not "no process".
TEST_F(Cli, RecordPidOfAnotherUserSaysPermission) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run memtrack as user nobody";
  const RunResult r = run_process({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                   MEMTRACK_BIN, "record", "-o", "/dev/null", "--pid", "1"},
                                  kDeadline);
  EXPECT_EQ(r.exit_code(), kRecordFailed) << context(r);
  EXPECT_NE(r.err.find("not permitted to attach to process 1"), std::string::npos) << context(r);
  EXPECT_EQ(r.err.find("no process"), std::string::npos) << context(r);
}

TEST_F(Cli, RecordExitsWithTheCommandsStatus) {
  MEMTRACK_REQUIRE_BPF_PRIVILEGES();
  const RunResult seven = memtrack({"record", "-q", "-o", dir_.file("seven.zst"), "--", "/bin/sh", "-c", "exit 7"});
  EXPECT_EQ(seven.exit_code(), 7) << context(seven);
  const RunResult killed =
      memtrack({"record", "-q", "-o", dir_.file("killed.zst"), "--", "/bin/sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(killed.exit_code(), 128 + SIGTERM) << context(killed);
}

TEST_F(Cli, RecordOfACommandThatCannotRun) {
  MEMTRACK_REQUIRE_BPF_PRIVILEGES();
  const RunResult missing = memtrack({"record", "-q", "-o", dir_.file("a.zst"), "--", dir_.file("no-such-command")});
  EXPECT_EQ(missing.exit_code(), kNotFound) << context(missing);
  write_file(dir_.file("not-executable"), "#!/bin/sh\n");
  const RunResult denied = memtrack({"record", "-q", "-o", dir_.file("b.zst"), "--", dir_.file("not-executable")});
  EXPECT_EQ(denied.exit_code(), kCannotExecute) << context(denied);
}

}  // namespace
// The README holds the code: every option a command accepts is named in it,
// and every status memtrack exits with is in its "Exit statuses" (a flag
// added, renamed or a status changed without the README fails here).
bool mentions(const std::string& text, const std::string& option) {
  for (size_t at = text.find(option); at != std::string::npos; at = text.find(option, at + 1)) {
    char next = at + option.size() < text.size() ? text[at + option.size()] : ' ';
    if (!std::isalnum(static_cast<unsigned char>(next)) && next != '-') return true;
  }
  return false;
}

TEST(Docs, TheReadmeNamesEveryOptionAndExitStatus) {
  const std::string readme = read_file(MEMTRACK_README);
  ASSERT_FALSE(readme.empty()) << MEMTRACK_README;
  // An option, with its short name when it has one ("-o,--output").
  const std::regex option(R"((?:(-[a-zA-Z]),)?(--[a-z][a-z0-9-]*))");
  for (const char* command : {"record", "report", "diff", "check", "info", "dump", "export-modules"}) {
    RunResult help = memtrack({command, "--help"});
    ASSERT_EQ(help.exit_code(), 0) << help.describe();
    size_t options = 0;
    for (auto it = std::sregex_iterator(help.out.begin(), help.out.end(), option); it != std::sregex_iterator();
         ++it) {
      const std::string short_name = (*it)[1], name = (*it)[2];
      if (name == "--help") continue;
      ++options;
      EXPECT_TRUE(mentions(readme, name) || (!short_name.empty() && mentions(readme, short_name)))
          << "memtrack " << command << " " << name << " is not in README.md";
    }
    if (std::string(command) == "record") {
      EXPECT_GT(options, 20u) << help.out;
    }
  }
  namespace status = memtrack::exit_status;
  for (int code : {status::kOk, status::kDamagedInput, status::kUsage, status::kNoOutput, status::kBudgetBroken})
    EXPECT_TRUE(mentions(readme, "| " + std::to_string(code) + " |")) << "status " << code << " has no row";
  for (int code : {status::kRecordFailed, status::kCannotExecute, status::kCommandNotFound})
    EXPECT_TRUE(mentions(readme, std::to_string(code))) << "record's status " << code << " is not in README.md";
}

// The docs hold to the code the other way: every option they give a memtrack
// command is one that command's --help prints (a flag removed or renamed in
// the code fails here until the docs follow). Read are README.md and
// docs/*.md but docs/benchmarks-history.md (dated runs, with the flags of
// their time). Only memtrack's own command lines count, so the flags of other
// tools (cmake, ctest, heaptrack, go tool pprof, the bench scripts, the
// recorded program's) never do: in a line of a code block (continuation lines
// joined; an indented line is code) or an inline code span, the options after
// "memtrack SUBCOMMAND", or in a span that starts with the subcommand
// (`record --hold ptrace`), up to the end of that command: a lone "--" (the
// recorded command follows), a pipe (" |", not "text|json"), ";", "&&" or the
// next memtrack command. A span of options alone (`--no-stacks`) names an
// option of some memtrack command, or one of kOtherToolsOptions.
const char* const kCommands[] = {"record", "report", "diff", "check", "info", "dump", "export-modules"};

// Options of other tools that the docs name in a span of their own.
const char* const kOtherToolsOptions[] = {
    "--prefix",                         // cmake --install (README.md, "Set up")
    "--normalized",                     // parca-push's (docs/REPORT.md, pprof uploads)
    "--disable-builtin-suppressions",  // heaptrack_print's and heaptrack_gui's (docs/REPORT.md)
};

struct DocumentedCommand {
  std::string where;  // "docs/REPORT.md:12"
  std::string command;  // empty: a span of options alone
  std::string text;  // what follows the subcommand
};

// The memtrack command lines of one Markdown text.
std::vector<DocumentedCommand> memtrack_commands(const std::string& name, const std::string& markdown) {
  // Code: each line of a code block (with its continuations) or inline span.
  std::vector<std::pair<size_t, std::string>> code;  // line number, text
  std::vector<std::pair<size_t, std::string>> spans;
  std::istringstream lines(markdown);
  std::string line, joined;
  bool fenced = false;
  size_t number = 0, joined_from = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (line.find_first_not_of(' ') != std::string::npos && line.substr(line.find_first_not_of(' '), 3) == "```") {
      fenced = !fenced;
      continue;
    }
    // An indented line is code too (a block, or one in a list item).
    if (fenced || line.starts_with("    ") || !joined.empty()) {
      if (joined.empty()) joined_from = number;
      const bool continued = !line.empty() && line.back() == '\\';
      joined += continued ? line.substr(0, line.size() - 1) : line;
      if (!continued) code.emplace_back(joined_from, std::exchange(joined, ""));
      continue;
    }
    for (size_t open = line.find('`'); open != std::string::npos;) {
      size_t ticks = line.find_first_not_of('`', open) - open;
      size_t close = line.find(std::string(ticks, '`'), open + ticks);
      if (close == std::string::npos) break;
      spans.emplace_back(number, line.substr(open + ticks, close - open - ticks));
      open = line.find('`', close + ticks);
    }
  }
  std::string alternatives;
  for (const char* command : kCommands) alternatives += std::string(alternatives.empty() ? "" : "|") + command;
  const std::regex invocation("memtrack[\"']?\\s+(" + alternatives + ")(?=\\s|$)");
  const std::regex span_start("^\\s*(" + alternatives + ")\\s+-");
  const std::regex end_of_command(R"((^|\s)--(\s|$)|\s\||;|&&|memtrack[\"']?\s)");
  std::vector<DocumentedCommand> found;
  auto add = [&](size_t at_line, const std::string& command, const std::string& rest) {
    std::smatch end;
    std::string text = std::regex_search(rest, end, end_of_command) ? rest.substr(0, end.position(0)) : rest;
    found.push_back({name + ":" + std::to_string(at_line), command, text});
  };
  auto scan = [&](size_t at_line, const std::string& text, bool is_span) {
    std::smatch start;
    if (is_span && std::regex_search(text, start, span_start)) add(at_line, start[1], start.suffix());
    if (is_span && text.starts_with("--")) add(at_line, "", text);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), invocation); it != std::sregex_iterator(); ++it)
      add(at_line, (*it)[1], text.substr(it->position(0) + it->length(0)));
  };
  for (const auto& [at_line, text] : code) scan(at_line, text, false);
  for (const auto& [at_line, text] : spans) scan(at_line, text, true);
  return found;
}

TEST(Docs, EveryOptionTheDocsGiveACommandIsInItsHelp) {
  std::vector<std::pair<std::string, std::string>> documents = {{"README.md", read_file(MEMTRACK_README)}};
  for (const auto& entry : fs::directory_iterator(MEMTRACK_DOCS)) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() == ".md" && file != "benchmarks-history.md")
      documents.emplace_back("docs/" + file, read_file(entry.path().string()));
  }
  ASSERT_GE(documents.size(), 6u) << MEMTRACK_DOCS;
  const std::regex flag(R"((?:^|[^A-Za-z0-9_-])(--[a-z][a-z0-9-]*))");
  std::map<std::string, std::string> help;  // command: its --help
  for (const char* command : kCommands) {
    RunResult run = memtrack({command, "--help"});
    ASSERT_EQ(run.exit_code(), 0) << run.describe();
    help[command] = run.out;
  }
  size_t checked = 0;
  for (const auto& [name, text] : documents) {
    ASSERT_FALSE(text.empty()) << name;
    for (const DocumentedCommand& documented : memtrack_commands(name, text)) {
      for (auto it = std::sregex_iterator(documented.text.begin(), documented.text.end(), flag);
           it != std::sregex_iterator(); ++it) {
        ++checked;
        const std::string option = (*it)[1];
        if (!documented.command.empty()) {
          EXPECT_TRUE(mentions(help[documented.command], option))
              << documented.where << ": memtrack " << documented.command << " has no option " << option
              << " (in `" << documented.text << "`)";
          continue;
        }
        bool known = std::ranges::find(kOtherToolsOptions, option) != std::end(kOtherToolsOptions);
        for (const auto& [command, text] : help) known = known || mentions(text, option);
        EXPECT_TRUE(known) << documented.where << ": no memtrack command has the option " << option << " (in `"
                           << documented.text << "`)";
      }
    }
  }
  EXPECT_GT(checked, 50u) << "the docs' memtrack command lines were not found";
}

}  // namespace memtrack::testing
