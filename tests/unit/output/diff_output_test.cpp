// The outputs of diff and check (src/report/diff_*.cpp) on hand-made
// reports and profiles: broken budgets first, markdown that survives names
// with pipes and backticks, 80-column text, the JSON schema's keys and
// signed changes (docs/REPORT.md).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sstream>

#include "output/diff_output.h"

namespace memtrack {
namespace {

using nlohmann::json;

Report report_of(uint64_t allocated, uint64_t leaked, const std::string& command) {
  Report r;
  r.header.command = {command};
  ProcessReport p;
  p.pid = 42;
  p.command = command;
  p.exe = "/usr/bin/" + command;
  p.figures.total_allocated = allocated;
  p.figures.leaked_bytes = leaked;
  p.figures.calls.malloc = 3;
  r.processes.push_back(p);
  r.totals = p.figures;
  return r;
}

// One site whose only frame is `function` in /build/app.
Profile profile_of(const std::vector<std::pair<std::string, uint64_t>>& sites) {
  Profile p;
  p.modules.push_back({"/build/app", "", 0x400000, 0x500000, 0, true});
  p.definitions_by_outcome[0] = sites.size();
  for (const auto& [function, bytes] : sites) {
    ProfileLocation location;
    location.address = 0x401000 + 16 * p.locations.size();
    location.module = 0;
    location.frames.push_back({function, "/src/app.cpp", 10, 0, false, std::nullopt});
    ProfileSite site;
    site.outcome = StackOutcome::Complete;
    site.locations.push_back(static_cast<uint32_t>(p.locations.size()));
    p.locations.push_back(location);
    site.costs.allocations = 1;
    site.costs.allocated_bytes = bytes;
    p.totals.add(site.costs);
    p.sites.push_back(site);
  }
  return p;
}

class DiffOutput : public ::testing::Test {
 protected:
  void SetUp() override {
    diff_ = diff_recordings(base_, &base_profile_, head_, &head_profile_);
    for (const Budget& budget : budgets_)
      view_.budgets.push_back(evaluate_budget(budget, &base_, head_, diff_.processes));
    view_.diff = &diff_;
    view_.base_file = "base.zst";
    view_.head_file = "head.zst";
  }

  Report base_ = report_of(1000, 0, "app"), head_ = report_of(1500, 64, "app");
  Profile base_profile_ = profile_of({{"Pipe<a|b>::grow", 1000}});
  Profile head_profile_ = profile_of({{"Pipe<a|b>::grow", 1400}, {"`odd` name", 100}});
  std::vector<Budget> budgets_ = {parse_budget("leaked>+64", Budget::Kind::FailIf),
                                  parse_budget("allocated>+10%", Budget::Kind::FailIf)};
  RecordingDiff diff_;
  DiffView view_;
};

TEST_F(DiffOutput, MarkdownBrokenFirstAndEscaped) {
  std::ostringstream out;
  write_diff_markdown(view_, out);
  const std::string md = out.str();
  EXPECT_EQ(md.rfind("### memtrack diff: ❌ 1 of 2 budgets broken\n", 0), 0u) << md;
  size_t broken = md.find("- ❌ `allocated>+10%`:"), held = md.find("- ✅ `leaked>+64`");
  ASSERT_NE(broken, std::string::npos) << md;
  ASSERT_NE(held, std::string::npos) << md;
  EXPECT_LT(broken, held);
  EXPECT_NE(md.find("  - total: allocated 1000 B -> 1.46 KiB (+500 B, +50.0%)"), std::string::npos) << md;
  EXPECT_NE(md.find("| allocated | 1000 B | 1.46 KiB | **+500 B** | +50.0% |"), std::string::npos) << md;
  // A pipe would end the table cell, a backtick the code span.
  EXPECT_NE(md.find("| 1 | `Pipe<a\\|b>::grow` | 1000 B | 1.37 KiB | +400 B | +40.0% |"), std::string::npos) << md;
  EXPECT_NE(md.find("`'odd' name` (new)"), std::string::npos) << md;
  EXPECT_EQ(md.find("peak RSS"), std::string::npos) << "a figure neither run recorded is left out";
}

TEST_F(DiffOutput, TextFitsEightyColumns) {
  std::ostringstream out;
  write_diff_text(view_, out, false);
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 80u) << line;
  EXPECT_LT(out.str().find("BROKEN allocated>+10%"), out.str().find("held   leaked>+64")) << out.str();
  EXPECT_NE(out.str().find("Call paths by bytes allocated: 2 changed, 1 matched, 1 new, 0 gone"), std::string::npos)
      << out.str();
}

TEST_F(DiffOutput, JsonSchema) {
  std::ostringstream out;
  write_diff_json(view_, out);
  json d = json::parse(out.str());
  EXPECT_EQ(d["format_version"], 1);
  EXPECT_EQ(d["kind"], "diff");
  EXPECT_EQ(d["base"]["file"], "base.zst");
  EXPECT_EQ(d["broken_budgets"], 1);
  EXPECT_EQ(d["budgets"][0]["status"], "held");
  EXPECT_EQ(d["budgets"][1]["status"], "broken");
  EXPECT_EQ(d["budgets"][1]["violations"][0]["subject"], "total");
  EXPECT_EQ(d["totals"]["allocated"], json({{"base", 1000}, {"head", 1500}, {"change", 500}, {"relative_percent", 50.0}}));
  EXPECT_EQ(d["totals"]["peak_rss"], json({{"base", nullptr}, {"head", nullptr}, {"change", nullptr}, {"relative_percent", nullptr}}));
  EXPECT_EQ(d["totals"]["leaked"]["relative_percent"], nullptr);  // from 0
  EXPECT_EQ(d["processes"][0]["matched_by"], "command");
  EXPECT_EQ(d["sites"]["changed"], 2);
  EXPECT_EQ(d["sites"]["top"][0]["allocating_function"], "Pipe<a|b>::grow");
  EXPECT_EQ(d["sites"]["top"][0]["key"][0], json({{"function", "Pipe<a|b>::grow"}, {"file", "app.cpp"}, {"module", "app"}}));

  // A shrink: negative changes.
  RecordingDiff reverse = diff_recordings(head_, &head_profile_, base_, &base_profile_);
  DiffView view;
  view.diff = &reverse;
  std::ostringstream shrink;
  write_diff_json(view, shrink);
  json r = json::parse(shrink.str());
  EXPECT_EQ(r["totals"]["allocated"]["change"], -500);
  EXPECT_EQ(r["sites"]["gone"], 1);
}

TEST(CheckOutput, OneRecording) {
  Report run = report_of(5000, 10, "app");
  RecordingDiff single;
  single.head = &run;
  single.processes = process_tree(run);
  Budget budget = parse_budget("each.leaked<=8", Budget::Kind::Max);
  DiffView view;
  view.diff = &single;
  view.head_file = "run.zst";
  view.budgets.push_back(evaluate_budget(budget, nullptr, run, single.processes));
  std::ostringstream json_out, text_out;
  write_diff_json(view, json_out);
  json d = json::parse(json_out.str());
  EXPECT_EQ(d["kind"], "check");
  EXPECT_EQ(d["recording"]["file"], "run.zst");
  EXPECT_EQ(d["totals"]["allocated"], 5000);
  EXPECT_EQ(d["budgets"][0]["status"], "broken");
  EXPECT_EQ(d["budgets"][0]["violations"][0]["subject"]["pid"], 42);
  EXPECT_EQ(d["budgets"][0]["violations"][0]["values"], 10);
  EXPECT_EQ(d["sites"], nullptr);
  write_diff_text(view, text_out, false);
  EXPECT_NE(text_out.str().find("process app (pid 42): leaked 10 B"), std::string::npos) << text_out.str();
}

}  // namespace
}  // namespace memtrack
