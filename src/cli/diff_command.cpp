#include "cli/diff_command.h"

#include <unistd.h>

#include <fstream>
#include <iostream>
#include <optional>
#include <stdexcept>

#include "analyze/budget.h"
#include "analyze/recording_diff.h"
#include "cli/exit_status.h"
#include "cli/progress.h"
#include "output/diff/diff_output.h"

namespace memtrack {
namespace {

// Every budget parsed before anything is read: a typo costs no analysis.
std::optional<std::vector<Budget>> parse_budgets(const DiffOptions& options, const char* command, bool single) {
  std::vector<Budget> budgets;
  bool ok = true;
  auto parse = [&](const std::string& text, Budget::Kind kind) {
    const char* option = kind == Budget::Kind::Max ? "--max" : "--fail-if";
    try {
      budgets.push_back(parse_budget(text, kind));
      if (single) validate_for_single_recording(budgets.back());
    } catch (const BudgetSyntaxError& e) {
      std::cerr << "memtrack " << command << ": " << option << " '" << text << "': " << describe_syntax_error(text, e)
                << "\n";
      ok = false;
    }
  };
  for (const std::string& text : options.fail_if) parse(text, Budget::Kind::FailIf);
  for (const std::string& text : options.max) parse(text, Budget::Kind::Max);
  if (!ok) return std::nullopt;
  return budgets;
}

AnalyzedRecording analyze(const DiffOptions& options, const std::string& file) {
  AnalysisOptions analysis = options.analysis;
  analysis.file = file;
  TerminalProgress progress;
  analysis.progress = progress.callbacks();
  return analyze_recording(analysis);
}

int write_and_judge(DiffView& view, const DiffOptions& options, const std::vector<Budget>& budgets, bool damaged) {
  const RecordingDiff& diff = *view.diff;
  const std::vector<ProcessMatch>& processes = diff.processes;
  for (const Budget& budget : budgets) view.budgets.push_back(evaluate_budget(budget, diff.base, *diff.head, processes));

  std::ofstream file;
  if (!options.output.empty()) {
    file.open(options.output, std::ios::binary);
    if (!file) throw std::runtime_error("cannot write " + options.output);
  }
  std::ostream& out = options.output.empty() ? std::cout : file;
  const DiffOutputFormat* format = find_diff_output_format(options.format);
  if (!format) throw std::logic_error("no output format " + options.format);  // main.cpp checks --format
  format->write(view, out, options.output.empty() && isatty(STDOUT_FILENO));
  out.flush();
  if (!out) throw std::runtime_error("cannot write " + (options.output.empty() ? "stdout" : options.output));

  bool unevaluable = false;
  for (const BudgetResult& result : view.budgets) {
    if (result.error.empty()) continue;
    std::cerr << "memtrack: budget '" << result.budget->text << "' cannot be evaluated: " << result.error << "\n";
    unevaluable = true;
  }
  if (unevaluable) return exit_status::kUsage;
  if (view.broken_budgets() > 0) {
    std::cerr << "memtrack: " << view.broken_budgets() << " of " << view.budgets.size() << " budgets broken\n";
    return exit_status::kBudgetBroken;
  }
  return damaged ? exit_status::kDamagedInput : exit_status::kOk;
}

void report_read_problems(const char* which, const AnalyzedRecording& run) {
  if (run.read_error) std::cerr << "memtrack: " << which << ": " << *run.read_error << "\n";
}

}  // namespace

int run_diff(const DiffOptions& options) {
  auto budgets = parse_budgets(options, "diff", /*single=*/false);
  if (!budgets) return exit_status::kUsage;
  AnalyzedRecording base = analyze(options, options.base);
  AnalyzedRecording head = analyze(options, options.head);
  report_read_problems(options.base.c_str(), base);
  report_read_problems(options.head.c_str(), head);
  const bool leaks_alike = count_leaks_alike(base.report, &base.profile, head.report, &head.profile);
  RecordingDiff diff = diff_recordings(base.report, &base.profile, head.report, &head.profile);
  if (leaks_alike)
    diff.notes.push_back("leaks count the C/C++ runtime's own blocks on both sides: without call paths they "
                         "cannot be told apart");
  DiffView view;
  view.diff = &diff;
  view.base_file = options.base;
  view.head_file = options.head;
  view.by = options.by;
  view.top = options.top;
  view.base_warnings = base.report.warnings;
  view.head_warnings = head.report.warnings;
  return write_and_judge(view, options, *budgets, base.damaged() || head.damaged());
}

int run_check(const DiffOptions& options) {
  auto budgets = parse_budgets(options, "check", /*single=*/true);
  if (!budgets) return exit_status::kUsage;
  DiffOptions heap_only = options;
  heap_only.analysis.call_paths = false;  // budgets test heap figures: no unwinding
  AnalyzedRecording run = analyze(heap_only, options.head);
  report_read_problems(options.head.c_str(), run);
  RecordingDiff diff;
  diff.head = &run.report;
  diff.processes = process_tree(run.report);
  DiffView view;
  view.diff = &diff;
  view.head_file = options.head;
  view.head_warnings = run.report.warnings;
  return write_and_judge(view, options, *budgets, run.damaged());
}

}  // namespace memtrack
