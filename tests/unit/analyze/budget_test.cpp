// The budget language (analyze/budget.h): parsing (scopes, figures,
// comparisons, signs, units, errors with their positions) and evaluation on
// hand-made reports: totals, each process, processes by name, absolute
// values, changes and relative changes, --fail-if against --max, figures a
// recording lacks. Also how processes are matched across two runs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "analyze/budget.h"
#include "analyze/recording_diff.h"

namespace memtrack {
namespace {

using K = Budget::Kind;

Budget parse(const std::string& text, K kind = K::FailIf) { return parse_budget(text, kind); }

// The position and reason of a syntax error; fails when the text parses.
std::pair<size_t, std::string> syntax_error(const std::string& text) {
  try {
    parse_budget(text, K::FailIf);
  } catch (const BudgetSyntaxError& e) {
    return {e.position(), e.what()};
  }
  ADD_FAILURE() << "parsed: " << text;
  return {0, ""};
}

TEST(BudgetParse, TotalsByDefault) {
  Budget b = parse("peak>+5%");
  EXPECT_EQ(b.scope, Budget::Scope::Total);
  EXPECT_EQ(b.figure, Figure::Peak);
  EXPECT_EQ(b.comparison, Budget::Comparison::Greater);
  EXPECT_EQ(b.value_kind, Budget::Value::Relative);
  EXPECT_EQ(b.value, 5.0L);
  EXPECT_EQ(b.text, "peak>+5%");
}

TEST(BudgetParse, SignsMakeChanges) {
  Budget plus = parse("alloc_calls>+1000");
  EXPECT_EQ(plus.value_kind, Budget::Value::Change);
  EXPECT_EQ(plus.value, 1000.0L);
  Budget minus = parse("alloc_calls < -20");
  EXPECT_EQ(minus.value_kind, Budget::Value::Change);
  EXPECT_EQ(minus.value, -20.0L);
  Budget absolute = parse("leaked>0");
  EXPECT_EQ(absolute.value_kind, Budget::Value::Absolute);
  EXPECT_EQ(absolute.value, 0.0L);
  Budget shrink = parse("peak<-10%");
  EXPECT_EQ(shrink.value_kind, Budget::Value::Relative);
  EXPECT_EQ(shrink.value, -10.0L);
  Budget unsigned_percent = parse("allocated>=2.5%");
  EXPECT_EQ(unsigned_percent.value_kind, Budget::Value::Relative);
  EXPECT_EQ(unsigned_percent.value, 2.5L);
}

TEST(BudgetParse, ByteUnitsAreBase1024) {
  EXPECT_EQ(parse("peak<=64MiB", K::Max).value, 64.0L * 1024 * 1024);
  EXPECT_EQ(parse("peak<=1.5 GiB").value, 1.5L * 1024 * 1024 * 1024);
  EXPECT_EQ(parse("leaked>+3KiB").value, 3072.0L);
  EXPECT_EQ(parse("leaked>100B").value, 100.0L);
  EXPECT_EQ(parse("leaked>100").value, 100.0L);
  EXPECT_EQ(parse("allocated<2TiB").value, 2.0L * 1024 * 1024 * 1024 * 1024);
}

TEST(BudgetParse, ComparisonsAndSpaces) {
  using C = Budget::Comparison;
  EXPECT_EQ(parse(" peak < 1 ").comparison, C::Less);
  EXPECT_EQ(parse("peak<=1").comparison, C::LessEqual);
  EXPECT_EQ(parse("peak>1").comparison, C::Greater);
  EXPECT_EQ(parse("peak>=1").comparison, C::GreaterEqual);
  EXPECT_EQ(parse("peak==1").comparison, C::Equal);
  EXPECT_EQ(parse("peak!=1").comparison, C::NotEqual);
}

TEST(BudgetParse, ScopesAndAliases) {
  Budget each = parse("each.leaked_blocks>0");
  EXPECT_EQ(each.scope, Budget::Scope::Each);
  EXPECT_EQ(each.figure, Figure::LeakedBlocks);
  Budget process = parse("process(cc1plus).peak>+5%");
  EXPECT_EQ(process.scope, Budget::Scope::Process);
  EXPECT_EQ(process.process, "cc1plus");
  Budget dotted = parse("process(python3.11) . temporary > +10");
  EXPECT_EQ(dotted.process, "python3.11");
  EXPECT_EQ(dotted.figure, Figure::Temporary);
  EXPECT_EQ(parse("total.peak_memory>1").figure, Figure::Peak);
  EXPECT_EQ(parse("total_allocated>1").figure, Figure::Allocated);
  EXPECT_EQ(parse("leaked_bytes>1").figure, Figure::Leaked);
  EXPECT_EQ(parse("leaked_count>1").figure, Figure::LeakedBlocks);
  EXPECT_EQ(parse("temporary_allocations>1").figure, Figure::Temporary);
  EXPECT_EQ(parse("free_calls>1").figure, Figure::FreeCalls);
  EXPECT_EQ(parse("peak_rss>1").figure, Figure::PeakRss);
  EXPECT_EQ(parse("live_at_end<=64MiB").figure, Figure::LiveAtEnd);
  EXPECT_EQ(parse("each.live_at_end_blocks>0").figure, Figure::LiveAtEndBlocks);
  EXPECT_EQ(parse("live_at_end_bytes>1").figure, Figure::LiveAtEnd);
  EXPECT_EQ(parse("live_at_end_count>1").figure, Figure::LiveAtEndBlocks);
}

TEST(BudgetParse, ErrorsSayWhereAndWhy) {
  auto [pos, why] = syntax_error("peek>+5%");
  EXPECT_EQ(pos, 0u);
  EXPECT_NE(why.find("unknown figure \"peek\""), std::string::npos) << why;
  EXPECT_NE(why.find("alloc_calls"), std::string::npos) << why;  // lists the figures

  std::tie(pos, why) = syntax_error("peak=5");
  EXPECT_EQ(pos, 4u);
  EXPECT_NE(why.find("=="), std::string::npos) << why;

  std::tie(pos, why) = syntax_error("peak>+x%");
  EXPECT_EQ(pos, 6u);
  EXPECT_NE(why.find("expected a number"), std::string::npos) << why;

  std::tie(pos, why) = syntax_error("peak>64MB");
  EXPECT_EQ(pos, 7u);
  EXPECT_NE(why.find("base 1024, write MiB"), std::string::npos) << why;

  std::tie(pos, why) = syntax_error("peak>64 parsecs");
  EXPECT_EQ(pos, 8u);
  EXPECT_NE(why.find("unknown unit"), std::string::npos) << why;

  std::tie(pos, why) = syntax_error("alloc_calls>+1KiB");
  EXPECT_EQ(pos, 14u);
  EXPECT_NE(why.find("alloc_calls is a count"), std::string::npos) << why;

  std::tie(pos, why) = syntax_error("peak>5% extra");
  EXPECT_EQ(pos, 8u);
  EXPECT_NE(why.find("unexpected \"extra\""), std::string::npos) << why;

  std::tie(pos, why) = syntax_error("peak");
  EXPECT_EQ(pos, 4u);
  EXPECT_NE(why.find("expected a comparison"), std::string::npos) << why;

  std::tie(pos, why) = syntax_error("every.peak>1");
  EXPECT_EQ(pos, 0u);
  EXPECT_NE(why.find("unknown scope \"every\""), std::string::npos) << why;

  std::tie(pos, why) = syntax_error("process(make.peak>1");
  EXPECT_NE(why.find("closing )"), std::string::npos) << why;

  std::tie(pos, why) = syntax_error("process().peak>1");
  EXPECT_EQ(pos, 8u);

  std::tie(pos, why) = syntax_error("peak>1.");
  EXPECT_EQ(pos, 7u);
  EXPECT_NE(why.find("decimal point"), std::string::npos) << why;

  std::tie(pos, why) = syntax_error("");
  EXPECT_NE(why.find("empty budget"), std::string::npos) << why;
}

TEST(BudgetParse, ErrorMessageHasACaret) {
  try {
    parse_budget("peak>+x%", K::FailIf);
    FAIL() << "parsed";
  } catch (const BudgetSyntaxError& e) {
    EXPECT_EQ(describe_syntax_error("peak>+x%", e), "at column 7: expected a number, not \"x\"\n  peak>+x%\n        ^");
  }
}

TEST(BudgetParse, OneRecordingTakesAbsoluteValuesOnly) {
  EXPECT_NO_THROW(validate_for_single_recording(parse("peak<=64MiB", K::Max)));
  try {
    validate_for_single_recording(parse("peak<=+5%", K::Max));
    FAIL() << "a relative change was accepted";
  } catch (const BudgetSyntaxError& e) {
    EXPECT_EQ(e.position(), 6u);
    EXPECT_NE(std::string(e.what()).find("two recordings"), std::string::npos);
  }
  EXPECT_THROW(validate_for_single_recording(parse("leaked>+0")), BudgetSyntaxError);
}

// ----------------------------------------------------------------- evaluation

ProcessReport process(int32_t pid, std::optional<int32_t> parent, const std::string& command, uint64_t peak,
                      uint64_t leaked = 0) {
  ProcessReport p;
  p.pid = pid;
  p.parent_pid = parent;
  p.command = command;
  p.exe = "/usr/bin/" + command.substr(0, command.find(' '));
  p.figures.peak_memory = peak;
  p.figures.leaked_bytes = leaked;
  return p;
}

Report report(std::vector<ProcessReport> processes) {
  Report r;
  r.processes = std::move(processes);
  for (const ProcessReport& p : r.processes) {
    r.totals.peak_memory += p.figures.peak_memory;
    r.totals.leaked_bytes += p.figures.leaked_bytes;
  }
  return r;
}

BudgetResult evaluate(const std::string& text, const Report& base, const Report& head, K kind = K::FailIf) {
  static std::vector<Budget> budgets;  // results point at their budget
  static std::vector<RecordingDiff> diffs;
  budgets.push_back(parse(text, kind));
  diffs.push_back(diff_recordings(base, nullptr, head, nullptr));
  return evaluate_budget(budgets.back(), &base, head, diffs.back().processes);
}

TEST(BudgetEvaluate, TotalsAbsoluteChangeAndRelative) {
  Report base = report({process(10, std::nullopt, "make", 1000)});
  Report head = report({process(20, std::nullopt, "make", 1100, 8)});
  EXPECT_TRUE(evaluate("peak>+5%", base, head).broken);   // +10 %
  EXPECT_FALSE(evaluate("peak>+10%", base, head).broken);  // exactly +10 %
  EXPECT_TRUE(evaluate("peak>=+10%", base, head).broken);
  EXPECT_TRUE(evaluate("peak>+99", base, head).broken);
  EXPECT_FALSE(evaluate("peak>+100", base, head).broken);
  EXPECT_TRUE(evaluate("leaked>0", base, head).broken);
  EXPECT_FALSE(evaluate("peak>1100", base, head).broken);  // absolute: the head's figure
  EXPECT_TRUE(evaluate("peak<-5%", head, base).broken);    // shrank by 9.1 %
  // --max: broken when it does not hold.
  EXPECT_TRUE(evaluate("peak<=1KiB", base, head, K::Max).broken);
  EXPECT_FALSE(evaluate("peak<=1100", base, head, K::Max).broken);
  BudgetResult r = evaluate("peak>+5%", base, head);
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_EQ(r.violations[0].process, nullptr);
  EXPECT_EQ(r.violations[0].values.base, 1000u);
  EXPECT_EQ(r.violations[0].values.head, 1100u);
}

TEST(BudgetEvaluate, FromZeroIsAnInfiniteIncrease) {
  Report base = report({process(10, std::nullopt, "app", 0)});
  Report head = report({process(10, std::nullopt, "app", 0, 64)});
  EXPECT_TRUE(evaluate("leaked>+1000%", base, head).broken);
  EXPECT_FALSE(evaluate("peak>+0%", base, head).broken);  // 0 -> 0 is no change
}

TEST(BudgetEvaluate, PerProcessSelectors) {
  // make -> sh -> cc1 (twice), in both runs; the head's second cc1 peaks higher.
  Report base = report({process(1, std::nullopt, "make all", 100), process(2, 1, "sh -c cc", 10),
                        process(3, 2, "cc1 a.c", 500), process(4, 2, "cc1 b.c", 500)});
  Report head = report({process(7, std::nullopt, "make all", 100), process(8, 7, "sh -c cc", 10),
                        process(9, 8, "cc1 a.c", 500), process(11, 8, "cc1 b.c", 800, 16)});
  BudgetResult cc1 = evaluate("process(cc1).peak>+10%", base, head);
  EXPECT_TRUE(cc1.broken);
  ASSERT_EQ(cc1.violations.size(), 1u);
  ASSERT_NE(cc1.violations[0].process, nullptr);
  EXPECT_EQ(cc1.violations[0].process->base->pid, 4);
  EXPECT_EQ(cc1.violations[0].process->head->pid, 11);
  EXPECT_FALSE(evaluate("process(make).peak>+0%", base, head).broken);
  BudgetResult each = evaluate("each.leaked>0", base, head);
  EXPECT_TRUE(each.broken);
  ASSERT_EQ(each.violations.size(), 1u);
  EXPECT_EQ(each.violations[0].process->head->pid, 11);
  EXPECT_FALSE(evaluate("each.peak<=800", base, head, K::Max).broken);
  EXPECT_TRUE(evaluate("each.peak<800", base, head, K::Max).broken);

  BudgetResult missing = evaluate("process(ld).peak>0", base, head);
  EXPECT_FALSE(missing.broken);
  EXPECT_NE(missing.error.find("no process is named \"ld\""), std::string::npos) << missing.error;
  EXPECT_NE(missing.error.find("cc1"), std::string::npos) << missing.error;
}

TEST(BudgetEvaluate, AFigureNotRecordedIsAnError) {
  Report base = report({process(10, std::nullopt, "app", 0)});
  BudgetResult r = evaluate("peak_rss>+5%", base, base);
  EXPECT_FALSE(r.broken);
  EXPECT_NE(r.error.find("peak_rss is not recorded"), std::string::npos) << r.error;
}

TEST(BudgetEvaluate, OneRecording) {
  Report run = report({process(10, std::nullopt, "app", 4096, 10)});
  std::vector<ProcessMatch> processes = process_tree(run);
  Budget max = parse("peak<=4KiB", K::Max);
  EXPECT_FALSE(evaluate_budget(max, nullptr, run, processes).broken);
  Budget tight = parse("peak<4KiB", K::Max);
  EXPECT_TRUE(evaluate_budget(tight, nullptr, run, processes).broken);
  Budget leaks = parse("process(app).leaked>0");
  BudgetResult r = evaluate_budget(leaks, nullptr, run, processes);
  EXPECT_TRUE(r.broken);
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_EQ(r.violations[0].process->head->pid, 10);
}

// ------------------------------------------------------------- process matching

// Only the base has call paths: its runtime-held and suppressed leaks go
// back into its leaked figures, so that a budget on leaks compares blocks
// counted alike (the head, without call paths, counts them as leaks).
TEST(LeaksAlike, WhenOnlyOneRecordingHasCallPaths) {
  Report base = report({process(1, std::nullopt, "app", 0, 100)});
  base.processes[0].figures.runtime_held_bytes = base.totals.runtime_held_bytes = 72704;
  base.processes[0].figures.runtime_held_count = base.totals.runtime_held_count = 1;
  base.processes[0].figures.suppressed_leaked_bytes = base.totals.suppressed_leaked_bytes = 8;
  base.processes[0].figures.suppressed_leaked_count = base.totals.suppressed_leaked_count = 1;
  Report head = report({process(2, std::nullopt, "app", 0, 72812)});
  Profile with_paths, without;
  with_paths.definitions_by_outcome[0] = 1;
  EXPECT_FALSE(count_leaks_alike(base, &with_paths, head, &with_paths)) << "both have call paths";
  EXPECT_FALSE(count_leaks_alike(base, &without, head, &without)) << "neither has";
  EXPECT_EQ(base.totals.leaked_bytes, 100u);
  ASSERT_TRUE(count_leaks_alike(base, &with_paths, head, &without));
  EXPECT_EQ(base.totals.leaked_bytes, 72812u);
  EXPECT_EQ(base.processes[0].figures.leaked_count, 2u);
  EXPECT_EQ(base.totals.runtime_held_bytes, 0u);
  EXPECT_EQ(head.totals.leaked_bytes, 72812u) << "the head is left as it was";
  EXPECT_FALSE(evaluate("leaked>+0", base, head).broken) << "the same blocks on both sides";
}

TEST(ProcessMatching, ByCommandThenExecutableInTreeOrder) {
  // Same tree, other pids; one child's command has a temporary file name
  // (matched by executable); argv[0] in another directory; one child new,
  // one gone.
  Report base = report({process(1, std::nullopt, "/base/build/app --x", 0), process(2, 1, "cc1 /tmp/ccAAAA.s", 0),
                        process(3, 1, "as foo.s", 0), process(4, 1, "ld a.o", 0), process(5, 4, "collect2", 0)});
  Report head = report({process(7, std::nullopt, "/head/build/app --x", 0), process(8, 7, "cc1 /tmp/ccBBBB.s", 0),
                        process(9, 7, "as foo.s", 0), process(10, 7, "strip a", 0)});
  base.processes[0].exe = "/base/build/app";
  head.processes[0].exe = "/head/build/app";
  RecordingDiff diff = diff_recordings(base, nullptr, head, nullptr);
  ASSERT_EQ(diff.processes.size(), 6u);
  auto pids = [](const ProcessMatch& m) {
    return std::pair{m.base ? m.base->pid : 0, m.head ? m.head->pid : 0};
  };
  EXPECT_EQ(pids(diff.processes[0]), std::pair(1, 7));
  EXPECT_EQ(diff.processes[0].matched_by, ProcessMatch::MatchedBy::Command);
  EXPECT_EQ(diff.processes[0].depth, 0u);
  EXPECT_EQ(pids(diff.processes[1]), std::pair(2, 8));
  EXPECT_EQ(diff.processes[1].matched_by, ProcessMatch::MatchedBy::Executable);
  EXPECT_EQ(diff.processes[1].depth, 1u);
  EXPECT_EQ(pids(diff.processes[2]), std::pair(3, 9));
  EXPECT_EQ(pids(diff.processes[3]), std::pair(0, 10));  // new
  EXPECT_EQ(pids(diff.processes[4]), std::pair(4, 0));   // gone, with its child
  EXPECT_EQ(pids(diff.processes[5]), std::pair(5, 0));
  EXPECT_EQ(diff.processes[5].depth, 2u);
}

TEST(ProcessMatching, SameCommandsPairInStartOrder) {
  Report base = report({process(1, std::nullopt, "sh", 0), process(2, 1, "w", 1), process(3, 1, "w", 2)});
  Report head = report({process(5, std::nullopt, "sh", 0), process(6, 5, "w", 1), process(7, 5, "w", 2)});
  RecordingDiff diff = diff_recordings(base, nullptr, head, nullptr);
  ASSERT_EQ(diff.processes.size(), 3u);
  EXPECT_EQ(diff.processes[1].base->pid, 2);
  EXPECT_EQ(diff.processes[1].head->pid, 6);
  EXPECT_EQ(diff.processes[2].base->pid, 3);
  EXPECT_EQ(diff.processes[2].head->pid, 7);
}

TEST(ProcessMatching, ParentIsTheLatestIncarnationOfItsPid) {
  // pid 2 is reused: its second incarnation forks pid 3.
  Report run = report({process(1, std::nullopt, "init", 0), process(2, 1, "first", 0), process(2, 1, "second", 0),
                       process(3, 2, "grandchild", 0)});
  std::vector<ProcessMatch> tree = process_tree(run);
  ASSERT_EQ(tree.size(), 4u);
  EXPECT_EQ(tree[2].head->command, "second");
  EXPECT_EQ(tree[3].head->command, "grandchild");
  EXPECT_EQ(tree[3].depth, 2u);
}

TEST(DiffNotes, DifferentCommandsAndVersionsAreSaid) {
  Report base = report({}), head = report({});
  base.header.command = {"/a/app", "--fast"};
  head.header.command = {"/b/app", "--fast"};
  EXPECT_EQ(diff_recordings(base, nullptr, head, nullptr).notes.size(), 1u);  // only: no call paths
  head.header.command = {"/b/app", "--slow"};
  head.header.format_version = base.header.format_version + 1;
  std::vector<std::string> notes = diff_recordings(base, nullptr, head, nullptr).notes;
  ASSERT_EQ(notes.size(), 3u);
  EXPECT_NE(notes[0].find("different commands"), std::string::npos);
  EXPECT_NE(notes[1].find(fmt::format("format versions: base {}, head {}", base.header.format_version,
                                      head.header.format_version)),
            std::string::npos);
  EXPECT_NE(notes[2].find("call paths"), std::string::npos);
}

}  // namespace
}  // namespace memtrack

// ---------------------------------------------------------------- site matching

namespace memtrack {
namespace {

// A profile of one module at `dir`/app whose code starts at `shift`: sites
// of (function, line) frames, innermost first, with allocated bytes.
Profile profile_of(const std::string& dir, uint64_t shift, uint32_t line_shift,
                   const std::vector<std::pair<std::vector<std::pair<std::string, uint32_t>>, uint64_t>>& sites) {
  Profile p;
  p.modules.push_back({dir + "/app", "", 0x400000, 0x500000, 0, true});
  p.definitions_by_outcome[0] = 1;  // it has call paths
  for (const auto& [frames, bytes] : sites) {
    ProfileSite site;
    site.outcome = StackOutcome::Complete;
    for (const auto& [function, line] : frames) {
      ProfileLocation location;
      location.address = 0x401000 + shift + p.locations.size() * 16;
      location.module = 0;
      location.file_offset = location.address - 0x400000;
      location.frames.push_back({function, dir + "/src/fx.c", line + line_shift, 0, false, std::nullopt});
      site.locations.push_back(static_cast<uint32_t>(p.locations.size()));
      p.locations.push_back(location);
    }
    site.costs.allocations = 1;
    site.costs.allocated_bytes = bytes;
    p.totals.add(site.costs);
    p.sites.push_back(site);
  }
  return p;
}

TEST(SiteMatching, ByFunctionFileAndModuleNamesOnly) {
  Profile base = profile_of("/ci/base", 0, 0,
                            {{{{"grow", 10}, {"main", 40}}, 1000},
                             {{{"steady", 20}, {"main", 41}}, 512},
                             {{{"removed", 30}, {"main", 42}}, 777},
                             // Another line of the same function: one key with the first.
                             {{{"grow", 12}, {"main", 40}}, 24}});
  Profile head = profile_of("/ci/head", 0x1234, 1000,
                            {{{{"steady", 20}, {"main", 41}}, 512},
                             {{{"grow", 10}, {"main", 40}}, 2000},
                             {{{"new_leak", 35}, {"main", 43}}, 4096}});
  Report report;
  RecordingDiff diff = diff_recordings(report, &base, report, &head);
  ASSERT_TRUE(diff.sites_compared);
  ASSERT_EQ(diff.sites.size(), 4u);
  std::map<std::string, const SiteDiff*> by_function;
  for (const SiteDiff& s : diff.sites) by_function[s.allocating_function] = &s;
  ASSERT_EQ(by_function.size(), 4u);
  const SiteDiff& grow = *by_function.at("grow");
  EXPECT_EQ(grow.base.allocated_bytes, 1024u);
  EXPECT_EQ(grow.base_sites, 2u);
  EXPECT_EQ(grow.head.allocated_bytes, 2000u);
  EXPECT_EQ(grow.frames.at(0).line, 1010u);  // shown from the head
  EXPECT_EQ(by_function.at("steady")->base.allocated_bytes, by_function.at("steady")->head.allocated_bytes);
  EXPECT_FALSE(by_function.at("new_leak")->in_base());
  EXPECT_FALSE(by_function.at("removed")->in_head());
  EXPECT_EQ(by_function.at("removed")->frames.at(0).module, "/ci/base/app");
  std::vector<size_t> ranked = diff.ranked_changes(CostKind::Bytes, 0);
  ASSERT_EQ(ranked.size(), 3u);  // steady unchanged
  EXPECT_EQ(diff.sites[ranked[0]].allocating_function, "new_leak");
  EXPECT_EQ(diff.sites[ranked[1]].allocating_function, "grow");
  EXPECT_EQ(diff.sites[ranked[2]].allocating_function, "removed");
  EXPECT_EQ(diff.ranked_changes(CostKind::Bytes, 1).size(), 1u);
}

}  // namespace
}  // namespace memtrack

namespace memtrack {
namespace {

// A chain of 50,000 forks (each process the parent of the next) is walked
// without recursion.
TEST(ProcessMatching, DeepChainsDoNotExhaustTheStack) {
  Report run;
  for (int32_t pid = 1; pid <= 50000; ++pid) {
    ProcessReport p;
    p.pid = pid;
    if (pid > 1) p.parent_pid = pid - 1;
    p.command = "sh";
    run.processes.push_back(p);
  }
  RecordingDiff diff = diff_recordings(run, nullptr, run, nullptr);
  ASSERT_EQ(diff.processes.size(), run.processes.size());
  EXPECT_EQ(diff.processes.back().depth, 49999u);
  EXPECT_EQ(diff.processes.back().base->pid, 50000);
  EXPECT_EQ(diff.processes.back().matched_by, ProcessMatch::MatchedBy::Command);
}

// 50,000 children of one process: each finds its parent at once.
TEST(ProcessMatching, WideTreesAreLinear) {
  Report run;
  for (int32_t pid = 1; pid <= 50000; ++pid) {
    ProcessReport p;
    p.pid = pid;
    if (pid > 1) p.parent_pid = 1;
    p.command = pid % 2 ? "cc1" : "as";
    run.processes.push_back(p);
  }
  RecordingDiff diff = diff_recordings(run, nullptr, run, nullptr);
  ASSERT_EQ(diff.processes.size(), run.processes.size());
  EXPECT_EQ(diff.processes.back().depth, 1u);
  EXPECT_EQ(diff.processes.back().base, diff.processes.back().head);
}

}  // namespace
}  // namespace memtrack
