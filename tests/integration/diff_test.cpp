// End-to-end tests of `memtrack diff` and `memtrack check` on fx_diff, one
// deterministic program built twice (tests/fixtures/fx_diff.c): the base
// recorded twice must diff to exactly zero with every call path matched;
// the head must differ by exactly the changes the fixture makes, matched to
// the right functions although every address and line moved; budgets fire
// (or not) with the documented exit statuses; and `go tool pprof
// -diff_base` of the two runs' pprof profiles shows the same changes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "recording.h"
#include "support/markdown_check.h"

namespace memtrack::testing {
namespace {

using nlohmann::json;

constexpr int kOk = 0, kUsage = 2, kBudgetBroken = 4;

// What the head changes (fx_diff.c), per figure of the totals.
constexpr int64_t kGrowBytesChange = 100 * (2000 - 1000);
constexpr int64_t kNewLeak = 4096;
constexpr int64_t kRemovedBytes = 10 * 777;

class Diff : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { dir_ = new TempDir; }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { MEMTRACK_REQUIRE_BPF_PRIVILEGES(); }

  // The recordings, made when a test first needs them (ctest runs each test
  // in a process of its own: each records only what it uses).
  static std::string recorded(std::string& artifact, const std::string& name, const std::string& program) {
    if (artifact.empty()) artifact = record(name, program);
    EXPECT_FALSE(artifact.empty()) << "a recording failed: " << record_failures_;
    return artifact;
  }
  static std::string base1() { return recorded(base1_, "base1.zst", FX_DIFF_BASE); }
  static std::string base2() { return recorded(base2_, "base2.zst", FX_DIFF_BASE); }
  static std::string head() { return recorded(head_, "head.zst", FX_DIFF_HEAD); }

  static std::string record(const std::string& name, const std::string& program) {
    std::string artifact = dir_->file(name);
    RunResult run = run_process({MEMTRACK_BIN, "record", "-q", "--stacks", "-o", artifact, "--", program},
                                std::chrono::seconds(90));
    if (run.exit_code() != 0 || !std::filesystem::exists(artifact)) {
      record_failures_ += "record " + program + ": " + run.describe() + "\n";
      return "";
    }
    Recording rec = read_recording(artifact);
    if (!clean_read(rec) || !no_losses(rec)) {
      record_failures_ += name + ": not read cleanly or with losses\n";
      return "";
    }
    return artifact;
  }

  static RunResult memtrack(std::vector<std::string> args) {
    args.insert(args.begin(), MEMTRACK_BIN);
    return run_process(args, std::chrono::seconds(60));
  }

  // `memtrack diff --format json --top 0 BASE HEAD ARGS...`: the document.
  static json diff_json(const std::string& base, const std::string& head, std::vector<std::string> args = {},
                        int expected_status = kOk) {
    std::vector<std::string> argv = {"diff", "--format", "json", "--top", "0", base, head};
    argv.insert(argv.end(), args.begin(), args.end());
    RunResult run = memtrack(argv);
    EXPECT_EQ(run.exit_code(), expected_status) << run.describe();
    json document = json::parse(run.out, nullptr, false);
    if (document.is_discarded()) {
      ADD_FAILURE() << "not JSON: " << run.out.substr(0, 2000);
      return json::object();
    }
    return document;
  }

  static inline TempDir* dir_ = nullptr;
  static inline std::string base1_, base2_, head_, record_failures_;
};

int64_t change_of(const json& figure) { return figure.at("change").get<int64_t>(); }

// The changed call path whose allocating function is `function`.
const json* changed_site(const json& document, const std::string& function) {
  for (const json& site : document.at("sites").at("top"))
    if (site.at("allocating_function") == function) return &site;
  return nullptr;
}

TEST_F(Diff, TheSameProgramTwiceDiffsToZero) {
  const std::string b1 = base1(), b2 = base2();
  ASSERT_FALSE(HasFailure());
  json d = diff_json(b1, b2);
  ASSERT_GE(d.at("totals").size(), 5u) << "no figures to compare: " << d.dump(2).substr(0, 2000);
  for (const auto& [name, figure] : d.at("totals").items()) {
    // RSS differs from run to run (the loader, the kernel's page cache).
    if (name == "peak_rss") continue;
    EXPECT_EQ(figure.at("change"), 0) << name << ": " << figure.dump();
  }
  ASSERT_TRUE(d.at("sites").is_object()) << d.dump(2).substr(0, 2000);
  const json& sites = d.at("sites");
  EXPECT_EQ(sites.at("new"), 0) << sites.dump(2).substr(0, 4000);
  EXPECT_EQ(sites.at("gone"), 0);
  EXPECT_EQ(sites.at("changed"), 0);
  EXPECT_GE(sites.at("matched").get<int>(), 4);  // grow, steady, keep_leak, removed
  for (const auto& [cost, figure] : sites.at("totals").items()) EXPECT_EQ(figure.at("change"), 0) << cost;
  ASSERT_FALSE(d.at("processes").empty());
  for (const json& p : d.at("processes")) {
    EXPECT_EQ(p.at("matched_by"), "command") << p.dump();
    ASSERT_GE(p.at("figures").size(), 5u) << p.dump();
    for (const auto& [name, figure] : p.at("figures").items()) {
      if (name == "peak_rss") continue;  // differs from run to run
      EXPECT_EQ(figure.at("change"), 0) << name;
    }
  }
  EXPECT_TRUE(d.at("notes").empty()) << d.at("notes").dump();
  // Every count and byte figure: no budget on a change fires.
  RunResult run = memtrack({"diff", b1, b2, "--fail-if", "alloc_calls!=+0", "--fail-if", "allocated!=+0",
                            "--fail-if", "peak!=+0%", "--fail-if", "leaked!=+0", "--fail-if", "leaked_blocks!=+0",
                            "--fail-if", "temporary!=+0", "--fail-if", "free_calls!=+0"});
  EXPECT_EQ(run.exit_code(), kOk) << run.describe();
}

TEST_F(Diff, TheHeadsChangesExactly) {
  const std::string b1 = base1(), h = head();
  ASSERT_FALSE(HasFailure());
  json d = diff_json(b1, h);
  const json& totals = d.at("totals");
  EXPECT_EQ(change_of(totals.at("alloc_calls")), 1 - 10);  // + new_leak, - removed's 10
  EXPECT_EQ(change_of(totals.at("free_calls")), -10);
  EXPECT_EQ(change_of(totals.at("allocated")), kGrowBytesChange + kNewLeak - kRemovedBytes);
  EXPECT_EQ(change_of(totals.at("leaked")), kNewLeak);
  EXPECT_EQ(change_of(totals.at("leaked_blocks")), 1);
  EXPECT_EQ(change_of(totals.at("temporary")), -10);
  // The peak: removed()'s block over keep_leak's 300 in the base, both leaks in the head.
  EXPECT_EQ(totals.at("peak").at("base"), 300 + 777);
  EXPECT_EQ(totals.at("peak").at("head"), 300 + 4096);
  // Recorded by default (Rss records): the timeline's peak RSS.
  EXPECT_GT(totals.at("peak_rss").at("base").get<uint64_t>(), 0u) << totals.dump(2);
  EXPECT_GT(totals.at("peak_rss").at("head").get<uint64_t>(), 0u) << totals.dump(2);

  const json& sites = d.at("sites");
  EXPECT_EQ(sites.at("new"), 1) << sites.dump(2).substr(0, 4000);
  EXPECT_EQ(sites.at("gone"), 1);
  EXPECT_EQ(sites.at("changed"), 3);  // grow, new_leak, removed; steady and keep_leak matched unchanged
  const json* grow = changed_site(d, "grow");
  ASSERT_NE(grow, nullptr) << sites.dump(2).substr(0, 4000);
  EXPECT_EQ(grow->at("status"), "matched");
  EXPECT_EQ(change_of(grow->at("cost")), kGrowBytesChange);
  EXPECT_EQ(grow->at("cost").at("relative_percent"), 100.0);
  // Shown with the head's frames: lines past the head's #line 1000.
  ASSERT_FALSE(grow->at("frames").empty());
  EXPECT_EQ(grow->at("frames")[0].at("label"), "grow");
  EXPECT_GT(grow->at("frames")[0].at("line").get<int>(), 1000);
  const json* leak = changed_site(d, "new_leak");
  ASSERT_NE(leak, nullptr);
  EXPECT_EQ(leak->at("status"), "new");
  EXPECT_EQ(change_of(leak->at("cost")), kNewLeak);
  EXPECT_EQ(leak->at("head").at("leaked_bytes"), kNewLeak);
  const json* removed = changed_site(d, "removed");
  ASSERT_NE(removed, nullptr);
  EXPECT_EQ(removed->at("status"), "gone");
  EXPECT_EQ(change_of(removed->at("cost")), -kRemovedBytes);
  // Ranked by the size of the change.
  EXPECT_EQ(sites.at("top")[0].at("allocating_function"), "grow");

  // By leaks: only the new leak changed.
  json by_leaks = diff_json(b1, h, {"--by", "leaked"});
  ASSERT_EQ(by_leaks.at("sites").at("top").size(), 1u);
  EXPECT_EQ(by_leaks.at("sites").at("top")[0].at("allocating_function"), "new_leak");
}

TEST_F(Diff, BudgetsFireWithTheirExitStatus) {
  const std::string b1 = base1(), h = head();
  ASSERT_FALSE(HasFailure());
  // allocated grew by about 94 %: broken; leaked_blocks grew by exactly 1: held.
  json d = diff_json(b1, h, {"--fail-if", "allocated>+5%", "--fail-if", "leaked_blocks>+1"}, kBudgetBroken);
  ASSERT_EQ(d.at("budgets").size(), 2u);
  EXPECT_EQ(d.at("budgets")[0].at("status"), "broken");
  EXPECT_EQ(d.at("budgets")[0].at("violations")[0].at("subject"), "total");
  EXPECT_EQ(d.at("budgets")[1].at("status"), "held");
  EXPECT_EQ(d.at("broken_budgets"), 1);

  EXPECT_EQ(memtrack({"diff", b1, h, "--fail-if", "leaked>+4096"}).exit_code(), kOk);
  EXPECT_EQ(memtrack({"diff", b1, h, "--fail-if", "leaked>+4095"}).exit_code(), kBudgetBroken);
  EXPECT_EQ(memtrack({"diff", b1, h, "--fail-if", "alloc_calls>+0"}).exit_code(), kOk);  // 9 fewer
  EXPECT_EQ(memtrack({"diff", b1, h, "--fail-if", "alloc_calls<-8"}).exit_code(), kBudgetBroken);
  EXPECT_EQ(memtrack({"diff", b1, h, "--fail-if", "process(fx_diff).leaked>+4KiB"}).exit_code(), kOk);
  EXPECT_EQ(memtrack({"diff", b1, h, "--fail-if", "process(fx_diff).peak>+300%"}).exit_code(),
            kBudgetBroken);  // 1077 -> 4396: +308 %
  EXPECT_EQ(memtrack({"check", b1, "--fail-if", "leaked>0"}).exit_code(), kBudgetBroken);  // 300 leaked

  // Errors: a malformed budget (nothing read) and one the recordings cannot answer.
  RunResult bad = memtrack({"diff", b1, h, "--fail-if", "peak>+5 %%"});
  EXPECT_EQ(bad.exit_code(), kUsage) << bad.describe();
  EXPECT_NE(bad.err.find("at column 10: unexpected \"%\""), std::string::npos) << bad.err;
  EXPECT_TRUE(bad.out.empty());
  RunResult unknown = memtrack({"diff", b1, h, "--fail-if", "process(nosuch).peak>0"});
  EXPECT_EQ(unknown.exit_code(), kUsage) << unknown.describe();
  EXPECT_NE(unknown.err.find("no process is named \"nosuch\""), std::string::npos) << unknown.err;
  // peak_rss can be evaluated: the recordings have Rss records.
  RunResult rss = memtrack({"diff", b1, h, "--fail-if", "peak_rss>+1000%"});
  EXPECT_EQ(rss.exit_code(), kOk) << rss.describe();
}

TEST_F(Diff, CheckTestsAbsoluteBudgets) {
  const std::string h = head();
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(memtrack({"check", h, "--max", "leaked<=4396", "--max", "peak<=4396"}).exit_code(), kOk);
  RunResult broken = memtrack({"check", h, "--max", "peak<=4KiB", "--format", "json"});
  EXPECT_EQ(broken.exit_code(), kBudgetBroken) << broken.describe();
  json d = json::parse(broken.out, nullptr, false);
  ASSERT_FALSE(d.is_discarded()) << broken.out;
  EXPECT_EQ(d.at("kind"), "check");
  EXPECT_EQ(d.at("budgets")[0].at("violations")[0].at("values"), 4396);
  EXPECT_EQ(d.at("totals").at("leaked"), 4396);
  EXPECT_EQ(memtrack({"check", h, "--fail-if", "leaked_blocks>1"}).exit_code(), kBudgetBroken);
  RunResult relative = memtrack({"check", h, "--max", "peak<=+5%"});
  EXPECT_EQ(relative.exit_code(), kUsage);
  EXPECT_NE(relative.err.find("two recordings"), std::string::npos) << relative.err;
}

// Peak RSS from the memory records (on by default): fx_memory touches 32 MiB
// of its own mapping, fx_diff almost nothing. The diff's peak_rss is the
// report's timeline peak of each run, in every output and in budgets; a run
// recorded without memory records has none, and a budget on it is an error.
TEST_F(Diff, PeakRssInEveryOutputAndInBudgets) {
  const std::string b1 = base1();
  ASSERT_FALSE(HasFailure());
  const std::string memory = dir_->file("memory.zst"), no_rss = dir_->file("no-rss.zst");
  for (const auto& [artifact, extra] : {std::pair{memory, ""}, std::pair{no_rss, "--no-memory-records"}}) {
    std::vector<std::string> argv = {MEMTRACK_BIN, "record", "-q", "-o", artifact};
    if (*extra) argv.emplace_back(extra);
    argv.insert(argv.end(), {"--", FX_MEMORY});
    RunResult run = run_process(argv, std::chrono::seconds(90));
    ASSERT_EQ(run.exit_code(), 0) << run.describe();
  }
  auto report_peak_rss = [&](const std::string& artifact) {
    RunResult run = memtrack({"report", "--format", "json", artifact});
    EXPECT_EQ(run.exit_code(), kOk) << run.describe();
    json report = json::parse(run.out, nullptr, false);
    return report.is_discarded() ? json() : report.at("timeline").at("total").at("peaks").at("rss").at("bytes");
  };
  const json base_rss = report_peak_rss(b1), memory_rss = report_peak_rss(memory);

  json d = diff_json(b1, memory, {"--fail-if", "peak_rss>+5%"}, kBudgetBroken);
  const json& rss = d.at("totals").at("peak_rss");
  EXPECT_EQ(rss.at("base"), base_rss) << rss.dump();
  EXPECT_EQ(rss.at("head"), memory_rss) << rss.dump();
  // fx_memory touches 32 MiB; the change is that less the base run's own
  // RSS (a few MiB with the interposer's shared memory of its threads).
  EXPECT_GE(rss.at("change").get<int64_t>(), 26 << 20) << "fx_memory touches 32 MiB: " << rss.dump();
  EXPECT_EQ(d.at("processes")[0].at("figures").at("peak_rss").at("head"), memory_rss);
  EXPECT_EQ(d.at("budgets")[0].at("status"), "broken");
  EXPECT_EQ(d.at("budgets")[0].at("violations")[0].at("values"), rss);
  ASSERT_FALSE(d.at("notes").empty());  // different commands: said, and compared anyway
  EXPECT_NE(d.at("notes")[0].get<std::string>().find("different commands"), std::string::npos) << d.at("notes");
  // The other way round it shrank: the budget holds.
  EXPECT_EQ(memtrack({"diff", memory, b1, "--fail-if", "peak_rss>+5%"}).exit_code(), kOk);
  EXPECT_EQ(memtrack({"check", memory, "--max", "peak_rss<=16MiB"}).exit_code(), kBudgetBroken);
  EXPECT_EQ(memtrack({"check", memory, "--max", "peak_rss<=4GiB"}).exit_code(), kOk);

  // Text and markdown show the row with both runs' values.
  RunResult text = memtrack({"diff", b1, memory});
  EXPECT_TRUE(std::regex_search(text.out, std::regex(R"(\n  peak RSS +[0-9.]+ [KM]iB +[0-9.]+ MiB +\+[0-9.]+ MiB +\+[0-9.]+%\n)")))
      << text.out;
  RunResult markdown = memtrack({"diff", b1, memory, "--format", "markdown"});
  EXPECT_TRUE(std::regex_search(markdown.out, std::regex(R"(\n\| peak RSS \| [0-9.]+ [KM]iB \| [0-9.]+ MiB \| \*\*\+[0-9.]+ MiB\*\* \|)")))
      << markdown.out;

  // Without memory records: not recorded, and a budget on it cannot be evaluated.
  json without = diff_json(b1, no_rss);
  EXPECT_TRUE(without.at("totals").at("peak_rss").at("head").is_null()) << without.at("totals").dump();
  EXPECT_TRUE(without.at("totals").at("peak_rss").at("change").is_null());
  RunResult unevaluable = memtrack({"diff", no_rss, no_rss, "--fail-if", "peak_rss>+5%"});
  EXPECT_EQ(unevaluable.exit_code(), kUsage) << unevaluable.describe();
  EXPECT_NE(unevaluable.err.find("peak_rss is not recorded"), std::string::npos) << unevaluable.err;
  RunResult no_rss_text = memtrack({"diff", no_rss, no_rss});
  EXPECT_TRUE(std::regex_search(no_rss_text.out, std::regex(R"(\n  peak RSS +not recorded\n)"))) << no_rss_text.out;
}

// Markdown puts the broken budgets first; text fits 80 columns.
TEST_F(Diff, MarkdownAndText) {
  const std::string b1 = base1(), h = head();
  ASSERT_FALSE(HasFailure());
  RunResult run = memtrack({"diff", b1, h, "--format", "markdown", "--fail-if", "leaked_blocks>+1",
                            "--fail-if", "allocated>+5%"});
  EXPECT_EQ(run.exit_code(), kBudgetBroken) << run.describe();
  const std::string& md = run.out;
  EXPECT_EQ(md.rfind("### memtrack diff: ❌ 1 of 2 budgets broken", 0), 0u) << md;
  size_t broken = md.find("- ❌ `allocated>+5%`"), held = md.find("- ✅ `leaked_blocks>+1`");
  ASSERT_NE(broken, std::string::npos) << md;
  ASSERT_NE(held, std::string::npos) << md;
  EXPECT_LT(broken, held);
  EXPECT_NE(md.find("| leaked | 300 B | 4.29 KiB | **+4.00 KiB** | +1365.3% |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1 | `grow` |"), std::string::npos) << md;
  EXPECT_NE(md.find("`new_leak` (new)"), std::string::npos) << md;
  EXPECT_NE(md.find("`removed` (gone)"), std::string::npos) << md;

  RunResult text = memtrack({"diff", b1, h, "--fail-if", "allocated>+5%"});
  EXPECT_EQ(text.exit_code(), kBudgetBroken) << text.describe();
  std::istringstream lines(text.out);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 80u) << line;
  EXPECT_NE(text.out.find("BROKEN allocated>+5%"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("new new_leak"), std::string::npos) << text.out;
}

// Issue 29, item 5, end to end: recordings whose argv, artifact paths and
// symbol names are markup (fx_hostile_names: `<script>` in a symbol), one of
// them damaged so that the warnings quote its path. In the markdown for a
// pull-request comment all of it stays text; before, the "different
// commands" note made a heading of "\n## Approved" and an image of <img>.
TEST_F(Diff, MarkdownKeepsHostileArgvPathsAndSymbolNamesAsText) {
  TempDir dir;
  const std::string evil = "\n## Approved\n<img src=https://evil.example/p.png> @everyone";
  const std::string base = dir.file("base\n## Approved <img src=x onerror=alert(1)>.zst");
  const std::string head = dir.file("head\n## Approved <img src=x onerror=alert(1)>.zst");
  for (const auto& [artifact, program] : {std::pair{base, std::string(FX_DIFF_BASE)}, std::pair{head, std::string(FX_HOSTILE_NAMES)}}) {
    RunResult run = run_process({MEMTRACK_BIN, "record", "-q", "--stacks", "-o", artifact, "--", program, "x" + evil},
                                std::chrono::seconds(90));
    ASSERT_EQ(run.exit_code(), 0) << run.describe();
  }
  std::filesystem::resize_file(head, std::filesystem::file_size(head) - 8);  // the trailer cut: warnings
  RunResult run = memtrack({"diff", base, head, "--format", "markdown"});
  EXPECT_EQ(run.exit_code(), 1) << run.describe();  // damaged head
  const std::string& md = run.out;
  testing::MarkdownScan scan = testing::scan_markdown(md, {"### memtrack diff", "#### Call paths by "},
                                                      {"<details>", "</details>", "<summary>", "</summary>"});
  EXPECT_TRUE(scan.problems.empty()) << ::testing::PrintToString(scan.problems) << "\n" << md;
  for (const char* marker : {"Approved", "evil", "everyone", "img", "script", "alert"})
    EXPECT_EQ(scan.outside_code.find(marker), std::string::npos) << marker << " outside code:\n" << scan.outside_code;
  // All of it shown, as text.
  EXPECT_NE(md.find("> **Note:** the recordings ran different commands: base `" + std::string(FX_DIFF_BASE) +
                    " x ## Approved <img src=https://evil.example/p.png> @everyone`"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("> **Head:** `" + dir.file("head ## Approved <img src=x onerror=alert(1)>.zst: ")), std::string::npos)
      << md;
  EXPECT_NE(md.find("`evil<script>alert(1)</script>"), std::string::npos) << md;
}

// The CI recipe of docs/REPORT.md (scripts/memory-diff.sh) on fx_diff's two
// builds: the markdown summary printed and appended to the job summary, the
// HTML page written, and the diff's status as the script's.
TEST_F(Diff, CiRecipeScriptGatesOnBudgets) {
  TempDir out;
  const std::string summary = out.file("step-summary.md");
  SpawnOptions env;
  env.env = {{"MEMTRACK", MEMTRACK_BIN}, {"OUT_DIR", out.file("memory")}, {"GITHUB_STEP_SUMMARY", summary}};
  RunResult broken = run_process({MEMORY_DIFF_SH, FX_DIFF_BASE, FX_DIFF_HEAD, "--fail-if", "allocated>+5%",
                                  "--fail-if", "leaked>+4096"},
                                 std::chrono::seconds(150), env);
  EXPECT_EQ(broken.exit_code(), kBudgetBroken) << broken.describe();
  EXPECT_EQ(broken.out.rfind("### memtrack diff: ❌ 1 of 2 budgets broken", 0), 0u) << broken.out;
  std::ifstream step_summary(summary);
  std::string appended((std::istreambuf_iterator<char>(step_summary)), std::istreambuf_iterator<char>());
  EXPECT_EQ(appended, broken.out);
  for (const char* file : {"base.zst", "head.zst", "memory.md", "memory.html"})
    EXPECT_TRUE(std::filesystem::exists(out.file("memory") + "/" + file)) << file;

  env.env.pop_back();  // no job summary
  RunResult held = run_process({MEMORY_DIFF_SH, FX_DIFF_BASE, FX_DIFF_HEAD, "--fail-if", "leaked>+4096"},
                               std::chrono::seconds(150), env);
  EXPECT_EQ(held.exit_code(), kOk) << held.describe();
  EXPECT_NE(held.out.find("✅ 1 budgets held"), std::string::npos) << held.out;
  RunResult missing = run_process({MEMORY_DIFF_SH, "/nonexistent/bench", FX_DIFF_HEAD}, std::chrono::seconds(60), env);
  EXPECT_EQ(missing.exit_code(), 3) << missing.describe();
  EXPECT_NE(missing.err.find("the base benchmark failed"), std::string::npos) << missing.err;
}

// `diff --format html` of real recordings: the page embeds the JSON output's
// document, and in headless Chromium (tests/browser/html_diff_test.py) shows
// its figures, without a script error.
TEST_F(Diff, HtmlPageShowsTheJsonOutputsFigures) {
  const std::string b1 = base1(), h = head();
  ASSERT_FALSE(HasFailure());
  const std::string page = dir_->file("diff.html"), expected = dir_->file("diff.json");
  const std::vector<std::string> budgets = {"--fail-if", "leaked>+0", "--fail-if", "peak_rss>+1000%"};
  std::vector<std::string> html = {"diff", b1, h, "--format", "html", "-o", page};
  html.insert(html.end(), budgets.begin(), budgets.end());
  RunResult run = memtrack(html);
  ASSERT_EQ(run.exit_code(), kBudgetBroken) << run.describe();
  json document = diff_json(b1, h, budgets, kBudgetBroken);
  {
    std::ifstream in(page);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string open = "<script type=\"application/json\" id=\"memtrack-data\">";
    size_t start = text.find(open);
    ASSERT_NE(start, std::string::npos);
    start += open.size();
    json data = json::parse(text.substr(start, text.find("</script>", start) - start), nullptr, false);
    ASSERT_FALSE(data.is_discarded());
    // --top 0 lists every changed call path; the page lists up to 500 of them.
    EXPECT_EQ(data.at("diff"), document);
    EXPECT_EQ(data.at("trees").at("top-down").at(2).at(0), document.at("sites").at("totals").at("bytes").at("head"));
  }
  std::ofstream(expected) << document.dump();
  RunResult browser = run_process({PYTHON3, HTML_DIFF_TEST, "--page", page, expected}, std::chrono::seconds(120));
  if (browser.exit_code() == 77) {
    std::fputs("\n*** SKIPPED: chromium not found: the diff page was NOT checked in a browser ***\n", stderr);
    GTEST_SKIP() << "chromium not found: the diff page was NOT checked in a browser";
  }
  EXPECT_EQ(browser.exit_code(), 0) << browser.describe();
}

// pprof users diff with `go tool pprof -diff_base BASE HEAD`: the functions'
// changes are the diff's.
TEST_F(Diff, GoPprofDiffBaseShowsTheSameChanges) {
  std::string go;
  for (const char* candidate : {"/usr/bin/go", "/usr/local/go/bin/go", "/usr/lib/go/bin/go"})
    if (access(candidate, X_OK) == 0) {
      go = candidate;
      break;
    }
  if (go.empty()) {
    std::fputs("\n*** SKIPPED: `go` not found: pprof -diff_base was NOT checked ***\n", stderr);
    GTEST_SKIP() << "`go` not found: pprof -diff_base was NOT checked";
  }
  const std::string b1 = base1(), b2 = base2(), h = head();
  ASSERT_FALSE(HasFailure());
  auto pprof_of = [&](const std::string& artifact, const std::string& name) {
    std::string out = dir_->file(name);
    RunResult run = memtrack({"report", "--format", "pprof", "-o", out, artifact});
    EXPECT_EQ(run.exit_code(), kOk) << run.describe();
    return out;
  };
  const std::string base_pb = pprof_of(b1, "base.pb.gz"), same_pb = pprof_of(b2, "same.pb.gz"),
                    head_pb = pprof_of(h, "head.pb.gz");
  SpawnOptions env;
  env.env = {{"HOME", dir_->path()}, {"GOCACHE", dir_->file("gocache")}, {"PPROF_TMPDIR", dir_->path()},
             {"GOFLAGS", ""}, {"GOTOOLCHAIN", "local"}, {"GOPROXY", "off"}};
  // function -> flat value of `-top` with -diff_base, in bytes or blocks.
  auto top = [&](const std::string& from, const std::string& to, const std::string& sample) {
    RunResult run = run_process({go, "tool", "pprof", "-symbolize=none", "-top", "-nodecount=1000", "-unit=byte",
                                 "-sample_index=" + sample, "-diff_base", from, to},
                                std::chrono::seconds(60), env);
    EXPECT_EQ(run.exit_code(), 0) << run.describe();
    std::map<std::string, int64_t> flat;
    static const std::regex row(R"(^\s*(-?\d+)B?\s+\S+%\s+\S+%\s+-?\d+B?\s+\S+%\s+(\S+)\s*$)");
    std::istringstream lines(run.out);
    for (std::string line; std::getline(lines, line);) {
      std::smatch m;
      if (std::regex_match(line, m, row)) flat[m[2]] += std::stoll(m[1]);
    }
    EXPECT_FALSE(run.out.empty());
    return std::pair{flat, run.out};
  };
  // Rows read with at(): a function missing from pprof's table fails, it does not read 0.
  auto row = [](const auto& table, const std::string& function, const std::string& out) -> int64_t {
    auto it = table.find(function);
    EXPECT_NE(it, table.end()) << function << " is not in the table\n" << out;
    return it == table.end() ? INT64_MIN : it->second;
  };
  auto [changes, out] = top(base_pb, head_pb, "alloc_space");
  EXPECT_EQ(row(changes, "grow", out), kGrowBytesChange) << out;
  EXPECT_EQ(row(changes, "new_leak", out), kNewLeak) << out;
  EXPECT_EQ(row(changes, "removed", out), -kRemovedBytes) << out;
  auto [leaks, leak_out] = top(base_pb, head_pb, "inuse_space");
  EXPECT_EQ(row(leaks, "new_leak", leak_out), kNewLeak) << leak_out;
  auto [nothing, same_out] = top(base_pb, same_pb, "alloc_space");
  // Nothing changed: pprof lists no row and says so.
  EXPECT_NE(same_out.find("Showing nodes accounting for 0, 0% of"), std::string::npos) << same_out;
  for (const auto& [function, value] : nothing) EXPECT_EQ(value, 0) << function << "\n" << same_out;
}

}  // namespace
}  // namespace memtrack::testing
