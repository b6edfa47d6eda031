// The outputs of diff and check (src/output/diff/) on hand-made
// reports and profiles: broken budgets first, markdown that survives names
// with pipes and backticks, 80-column text, the JSON schema's keys and
// signed changes (docs/REPORT.md); the HTML page's embedded data (the
// browser test, tests/browser/html_diff_test.py, checks what it shows).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>

#include "output/diff/diff_output.h"
#include "support/markdown_check.h"
#include "unit/output/diff_samples.h"

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

// Blocks live at the end of a recording that ended before its process: a
// figure of its own, listed by text and markdown only where a run has any
// (always in JSON); a budget on leaks does not count them.
TEST(CheckOutput, LiveAtEndIsNotLeaked) {
  // `check` of one recording (`single` holds its processes).
  auto check_of = [](const Report& run, RecordingDiff& single) {
    single.head = &run;
    single.processes = process_tree(run);
    DiffView view;
    view.diff = &single;
    view.head_file = "run.zst";
    return view;
  };
  Report run = report_of(5000, 0, "service");
  RecordingDiff without;
  std::ostringstream plain;
  write_diff_text(check_of(run, without), plain, false);
  EXPECT_EQ(plain.str().find("live at end"), std::string::npos) << plain.str();
  run.processes[0].figures.live_at_end_bytes = run.totals.live_at_end_bytes = 4096;
  run.processes[0].figures.live_at_end_count = run.totals.live_at_end_count = 2;
  RecordingDiff single;
  DiffView view = check_of(run, single);
  const std::vector<Budget> budgets = {parse_budget("leaked<=0", Budget::Kind::Max),
                                       parse_budget("live_at_end<=1KiB", Budget::Kind::Max)};
  for (const Budget& budget : budgets)
    view.budgets.push_back(evaluate_budget(budget, nullptr, run, single.processes));
  std::ostringstream text_out, markdown, json_out;
  write_diff_text(view, text_out, false);
  write_diff_markdown(view, markdown);
  write_diff_json(view, json_out);
  EXPECT_NE(text_out.str().find("live at end"), std::string::npos) << text_out.str();
  EXPECT_NE(text_out.str().find("blocks live at end"), std::string::npos) << text_out.str();
  EXPECT_NE(markdown.str().find("| live at end | 4.00 KiB |"), std::string::npos) << markdown.str();
  json d = json::parse(json_out.str());
  EXPECT_EQ(d["totals"]["live_at_end"], 4096);
  EXPECT_EQ(d["totals"]["live_at_end_blocks"], 2);
  EXPECT_EQ(d["totals"]["leaked"], 0);
  ASSERT_EQ(d["budgets"].size(), 2u);
  EXPECT_EQ(d["budgets"][0]["expression"], "leaked<=0");
  EXPECT_EQ(d["budgets"][0]["status"], "held");
  EXPECT_EQ(d["budgets"][1]["expression"], "live_at_end<=1KiB");
  EXPECT_EQ(d["budgets"][1]["status"], "broken");
}

// The JSON data inside the page's <script type="application/json"> element.
json embedded_data(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"memtrack-data\">";
  size_t start = page.find(open);
  EXPECT_NE(start, std::string::npos);
  start += open.size();
  size_t end = page.find("</script>", start);
  EXPECT_NE(end, std::string::npos);
  std::string data = page.substr(start, end - start);
  EXPECT_EQ(data.find('<'), std::string::npos) << "markup inside the data element";
  return json::parse(data);
}

// [frame label, base costs, head costs] of a tree node and its children by label.
std::string label_of(const json& data, const json& node) { return data["frames"][node[0].get<size_t>()][0]; }
const json* child(const json& data, const json& node, const std::string& label) {
  for (const json& c : node[3])
    if (label_of(data, c) == label) return &c;
  return nullptr;
}

TEST(DiffHtml, EmbedsTheJsonDocumentAndBothRunsTrees) {
  testing::SampleDiff sample;
  std::ostringstream page;
  write_diff_html(sample.view, page);
  json data = embedded_data(page.str());

  // The document is the JSON output's, with the page's 500 changed sites.
  DiffView listing = sample.view;
  listing.top = 500;
  std::ostringstream json_out;
  write_diff_json(listing, json_out);
  EXPECT_EQ(data["diff"], json::parse(json_out.str()));
  EXPECT_EQ(data["diff"]["sites"]["top"].size(), 3u);  // grow, removed, the new one
  EXPECT_EQ(data["by"], "bytes");
  ASSERT_EQ(data["figures"].size(), all_figures().size());
  EXPECT_EQ(data["figures"][4], json::array({"peak_rss", "peak RSS", true}));

  // The trees carry each run's costs: their roots are the sites' totals.
  for (const char* direction : {"top-down", "bottom-up"}) {
    const json& root = data["trees"][direction];
    EXPECT_EQ(label_of(data, root), "all");
    EXPECT_EQ(root[1][0], 1000 + 777 + 512) << direction;  // base bytes
    EXPECT_EQ(root[2][0], 1400 + 100 + 512) << direction;  // head bytes
    EXPECT_EQ(root[1][1], 25);                             // base allocations
    EXPECT_EQ(root[2][3], 100);                            // head leaked
  }
  const json& top_down = data["trees"]["top-down"];
  const json* main_node = child(data, top_down, "main");
  ASSERT_NE(main_node, nullptr) << top_down.dump();
  const json* grow = child(data, *main_node, "grow");
  const json* removed = child(data, *main_node, "removed");
  const json* hostile = child(data, *main_node, testing::kHostileFunction);
  ASSERT_TRUE(grow && removed && hostile) << top_down.dump();
  EXPECT_EQ((*grow)[1][0], 1000);
  EXPECT_EQ((*grow)[2][0], 1400);
  EXPECT_EQ((*removed)[2][0], 0) << "gone: nothing in the head";
  EXPECT_EQ((*hostile)[1][0], 0) << "new: nothing in the base";
  // Children by the head's cost: grow first, then steady, the new one, the gone one.
  EXPECT_EQ(label_of(data, (*main_node)[3][0]), "grow");
  EXPECT_EQ(label_of(data, (*main_node)[3].back()), "removed");
  // The frame table: [label, source file, module], names as data.
  EXPECT_EQ(data["frames"][(*grow)[0].get<size_t>()], json::array({"grow", "app.c", "app"}));
  // Bottom-up: the allocating functions under the root.
  EXPECT_NE(child(data, data["trees"]["bottom-up"], "grow"), nullptr);

  // Self-contained: the page's script and styles inlined, nothing fetched.
  const std::string& html = page.str();
  EXPECT_NE(html.find("Content-Security-Policy\" content=\"default-src 'none'"), std::string::npos);
  EXPECT_EQ(html.find("@SCRIPT@"), std::string::npos);
  EXPECT_EQ(html.find("@DATA@"), std::string::npos);
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  EXPECT_EQ(html.find(testing::kHostileFunction), std::string::npos) << "a name written as markup";
}

TEST(DiffHtml, SmallPathsMergeIntoOtherWithExactSums) {
  // 1,000 call paths of 1 byte each and one of 1,000,000: the small ones are
  // below 0.1 % of the root in every cost of both runs.
  std::vector<testing::SampleSite> sites = {{{"big", "main"}, testing::costs_of(1000, 1'000'000, 0)}};
  for (int i = 0; i < 1000; ++i) sites.push_back({{"small" + std::to_string(i), "main"}, testing::costs_of(1, 1, 0)});
  Profile profile = testing::profile_of_sites(sites);
  Report run = testing::run_of(1, testing::figures_of(2000, 1'001'000, 10, 0, 1 << 20),
                               testing::figures_of(0, 0, 0, 0, 0));
  RecordingDiff diff = diff_recordings(run, &profile, run, &profile);
  DiffView view;
  view.diff = &diff;
  json data = json::parse(diff_html_data(view));
  const json* main_node = child(data, data["trees"]["top-down"], "main");
  ASSERT_NE(main_node, nullptr);
  ASSERT_EQ((*main_node)[3].size(), 2u) << "big, then [other]";
  const json* other = child(data, *main_node, "[other]");
  ASSERT_NE(other, nullptr);
  EXPECT_EQ((*other)[1][0], 1000);
  EXPECT_EQ((*other)[2][0], 1000);
  EXPECT_EQ(data["pruned_nodes"]["top-down"], 1000);
  EXPECT_TRUE(data["diff"]["sites"]["top"].empty()) << "nothing changed";
}

TEST(DiffHtml, CheckAndRecordingsWithoutCallPathsHaveNoTrees) {
  testing::SampleCheck check;
  json data = json::parse(diff_html_data(check.view));
  EXPECT_EQ(data["diff"]["kind"], "check");
  EXPECT_TRUE(data["trees"].is_null());
  EXPECT_EQ(data["diff"]["totals"]["peak_rss"], 11 << 20);

  testing::SampleDiff sample;
  RecordingDiff totals_only = diff_recordings(sample.base, nullptr, sample.head, nullptr);
  DiffView view;
  view.diff = &totals_only;
  data = json::parse(diff_html_data(view));
  EXPECT_TRUE(data["trees"].is_null());
  EXPECT_TRUE(data["diff"]["sites"].is_null());
}

// Issue 29, item 5: a pull-request comment made of strings from the
// recordings. Argv, paths, process and symbol names with line breaks,
// headings, HTML, an image, a link, a mention, backticks and pipes stay text:
// in code spans, in fenced blocks they cannot leave, or escaped. Before, the
// "different commands" note wrote argv raw ("\n## Approved" became a heading,
// <img> a remote image), and so did the warnings and budget subjects.
TEST(DiffMarkdown, HostileArgvPathsAndSymbolNamesStayText) {
  // With and without slashes (a file name has none).
  const std::string evil = "\n## Approved\r\n<img src=https://evil.example/p.png> [x](https://evil.example) @everyone";
  const std::string evil_name = "\n## Approved\r\n<img src=x onerror=alert(1)> ```\n``` | `tick` ![i](x) @everyone\n---\n";
  testing::SampleDiff sample;
  sample.base.header.command = {"./app", "base" + evil};
  sample.head.header.command = {"./app", "head" + evil};
  for (Report* run : {&sample.base, &sample.head})
    for (ProcessReport& p : run->processes) {
      p.command += evil;
      p.exe += evil_name;
    }
  for (Profile* profile : {&sample.base_profile, &sample.head_profile})
    for (ProfileLocation& location : profile->locations)
      for (SourceFrame& frame : location.frames) {
        frame.function += evil_name;
        frame.file = "/ci/src/app" + evil_name + ".c";
      }
  sample.diff = diff_recordings(sample.base, &sample.base_profile, sample.head, &sample.head_profile);
  sample.view.budgets.clear();
  for (const Budget& budget : sample.budgets)
    sample.view.budgets.push_back(evaluate_budget(budget, &sample.base, sample.head, sample.diff.processes));
  sample.view.base_warnings = {"/tmp/base" + evil_name + ".zst: truncated: frame 3 at byte offset 100 is incomplete"};
  sample.view.head_warnings = {"/tmp/head" + evil_name + ".zst: no trailer: the recording was not finalized"};
  std::ostringstream out;
  write_diff_markdown(sample.view, out);
  const std::string md = out.str();

  testing::MarkdownScan scan = testing::scan_markdown(md, {"### memtrack diff", "#### Call paths by "},
                                                      {"<details>", "</details>", "<summary>", "</summary>"});
  EXPECT_TRUE(scan.problems.empty()) << ::testing::PrintToString(scan.problems) << "\n" << md;
  for (const char* marker : {"Approved", "evil.example", "everyone", "img", "tick", "alert"})
    EXPECT_EQ(scan.outside_code.find(marker), std::string::npos) << marker << " outside code:\n" << scan.outside_code;
  // Shown as text, not dropped: in the note, the command, the process table,
  // a budget's subject, a call path's function and frames, the warnings.
  auto line_with = [&](const std::string& start) {
    size_t at = md.find("\n" + start);
    return at == std::string::npos ? std::string() : md.substr(at + 1, md.find('\n', at + 1) - at - 1);
  };
  for (const char* start : {"> **Note:** the recordings ran different commands", "Command: ", "| `app", "  - process `app",
                            "1. `", "   main", "> **Base:** ", "> **Head:** "})
    EXPECT_NE(line_with(start).find("## Approved"), std::string::npos) << start << "\n" << md;
  EXPECT_NE(md.find("> **Note:** the recordings ran different commands: base `./app base ## Approved  <img "
                    "src=https://evil.example/p.png> [x](https://evil.example) @everyone`, head `./app head ## Approved"),
            std::string::npos)
      << md;
}

// Peak RSS, where the recordings have it, in every output and in budgets.
TEST(DiffPeakRss, InEveryOutputAndInBudgets) {
  testing::SampleDiff sample;
  std::ostringstream text, markdown, json_out;
  write_diff_text(sample.view, text, false);
  write_diff_markdown(sample.view, markdown);
  write_diff_json(sample.view, json_out);
  EXPECT_TRUE(std::regex_search(text.str(), std::regex(R"(\n  peak RSS +10\.00 MiB +11\.00 MiB +\+1\.00 MiB +\+10\.0%\n)")))
      << text.str();
  EXPECT_NE(markdown.str().find("| peak RSS | 10.00 MiB | 11.00 MiB | **+1.00 MiB** | +10.0% |"), std::string::npos)
      << markdown.str();
  json d = json::parse(json_out.str());
  EXPECT_EQ(d["totals"]["peak_rss"],
            json({{"base", 10 << 20}, {"head", 11 << 20}, {"change", 1 << 20}, {"relative_percent", 10.0}}));
  EXPECT_EQ(d["processes"][0]["figures"]["peak_rss"]["change"], 1 << 20);
  EXPECT_EQ(d["budgets"][1]["expression"], "peak_rss>+5%");
  EXPECT_EQ(d["budgets"][1]["status"], "broken");
  EXPECT_NE(markdown.str().find("- ❌ `peak_rss>+5%`:\n  - total: peak_rss 10.00 MiB -> 11.00 MiB (+1.00 MiB, +10.0%)"),
            std::string::npos)
      << markdown.str();
}

// The diff's outputs, as --help and the docs' usage lines list them.
TEST(DiffOutputRegistry, TheDocsListEveryFormat) {
  std::string names;
  for (const DiffOutputFormat* format : diff_output_formats()) {
    EXPECT_EQ(find_diff_output_format(format->name), format);
    EXPECT_FALSE(format->summary.empty());
    names += (names.empty() ? "" : "|") + std::string(format->name);
  }
  EXPECT_EQ(diff_output_formats().front()->name, "text") << "the default comes first";
  const std::string usage = "memtrack diff BASE HEAD [--format " + names + "]";
  for (const char* doc : {"README.md", "docs/REPORT.md"}) {
    std::ifstream in(std::string(MEMTRACK_SOURCE_DIR) + "/" + doc);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find(usage), std::string::npos) << doc << " does not say " << usage;
  }
}

}  // namespace
}  // namespace memtrack
