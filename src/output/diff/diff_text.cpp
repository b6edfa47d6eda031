// `memtrack diff` and `memtrack check` for a terminal: 80 columns, the
// broken budgets first.
#include <fmt/format.h>

#include "output/diff/diff_output.h"
#include "output/text/text_writer.h"

namespace memtrack {
namespace {

using text::fit;
using text::TextWriter;
namespace df = diff_format;

constexpr size_t kTextFramesShown = 6;

void write_budgets(const DiffView& view, TextWriter& w) {
  if (view.budgets.empty()) return;
  const size_t errors = df::unevaluable_budgets(view);
  w.title(fmt::format("Budgets: {} of {} broken{}", view.broken_budgets(), view.budgets.size(),
                      errors ? fmt::format(", {} cannot be evaluated", errors) : ""));
  for (const BudgetResult* budget : df::budgets_broken_first(view)) {
    const BudgetResult& r = *budget;
    const char* flag = r.broken ? "BROKEN" : !r.error.empty() ? "ERROR" : "held";
    std::string head = fmt::format("  {:<7}{}{}", flag, r.budget->kind == Budget::Kind::Max ? "--max " : "",
                                   r.budget->text);
    w.line(r.broken || !r.error.empty() ? w.red(fit(head, text::kLineWidth)) : fit(head, text::kLineWidth));
    if (!r.error.empty()) w.warning("         ", r.error);
    for (const BudgetViolation& v : r.violations)
      w.line(fit(fmt::format("         {}: {}", df::subject(v, view.single()),
                             df::violation(*r.budget, v, view.single())),
                 text::kLineWidth));
  }
}

void write_totals(const DiffView& view, TextWriter& w) {
  const RecordingDiff& diff = *view.diff;
  if (view.single()) {
    w.title("Totals");
    for (const FigureInfo& info : all_figures()) {
      if (!df::totals_row(info.figure, diff.total_change(info.figure))) continue;
      std::optional<uint64_t> value = diff.total_change(info.figure).head;
      w.line(fmt::format("  {:<22}{:>12}", info.title, value ? df::value(info.figure, value) : "not recorded"));
    }
    return;
  }
  w.title(fmt::format("{:<24}{:>12}{:>12}{:>14}", "Totals", "base", "head", "change"));
  for (const FigureInfo& info : all_figures()) {
    FigureChange c = diff.total_change(info.figure);
    if (!df::totals_row(info.figure, c)) continue;
    if (!c.base && !c.head) {
      w.line(fmt::format("  {:<22}{:>12}", info.title, "not recorded"));
      continue;
    }
    std::string row = fmt::format("  {:<22}{:>12}{:>12}{:>14}{:>10}", info.title, df::value(info.figure, c.base),
                                  df::value(info.figure, c.head), df::change(info.figure, c), df::relative(c));
    w.line(fit(row.substr(0, row.find_last_not_of(' ') + 1), text::kLineWidth));
  }
}

void write_processes(const DiffView& view, TextWriter& w) {
  const RecordingDiff& diff = *view.diff;
  if (diff.processes.size() < 2 || view.single()) return;
  w.title("Processes (matched by command line and place in the process tree)");
  w.line(fmt::format("  {:<28}{:>16}{:>16}{:>16}", "process", "allocated", "peak", "leaked"));
  for (const ProcessMatch& p : diff.processes) {
    std::string name = std::string(2 * std::min<size_t>(p.depth, 6), ' ') + p.name;
    if (!p.base) name += " (new)";
    if (!p.head) name += " (gone)";
    auto cell = [&](Figure f) {
      FigureChange c = p.change(f);
      std::string delta = df::change(f, c);
      return delta == "0" ? std::string("=") : delta;
    };
    w.line(fit(fmt::format("  {:<28}{:>16}{:>16}{:>16}", fit(name, 27), cell(Figure::Allocated), cell(Figure::Peak),
                           cell(Figure::Leaked)),
               text::kLineWidth));
  }
}

void write_sites(const DiffView& view, TextWriter& w) {
  const RecordingDiff& diff = *view.diff;
  if (view.single() || !diff.sites_compared) return;
  const df::SiteCounts counts = df::site_counts(diff);
  std::vector<size_t> changed_all = diff.ranked_changes(view.by, 0);
  std::vector<size_t> shown = diff.ranked_changes(view.by, view.top);
  w.title(fmt::format("Call paths by {}: {} changed, {} matched, {} new, {} gone", df::cost_title(view.by),
                      changed_all.size(), counts.matched, counts.added, counts.gone));
  const Figure figure = df::cost_figure(view.by);
  for (size_t index : shown) {
    const SiteDiff& s = diff.sites[index];
    FigureChange c = s.change(view.by);
    std::string status = !s.in_base() ? "new " : !s.in_head() ? "gone " : "";
    std::string rel = df::relative(c);
    w.line();
    w.line(fit(fmt::format("  {:>12} {:>7}  {}{}", df::change(figure, c), rel == "new" ? "" : rel, status,
                           s.allocating_function),
               text::kLineWidth));
    w.line(fit(fmt::format("  {:>12} -> {}", df::value(figure, c.base), df::value(figure, c.head)), text::kLineWidth));
    for (size_t i = 0; i < s.frames.size() && i < kTextFramesShown; ++i)
      w.line(fit("      " + df::frame_line(s.frames[i]), text::kLineWidth));
    if (s.frames.size() > kTextFramesShown) w.line(fmt::format("      ... {} more frames", s.frames.size() - kTextFramesShown));
  }
}

}  // namespace

void write_diff_text(const DiffView& view, std::ostream& out, bool color) {
  TextWriter w(out, color);
  const RecordingDiff& diff = *view.diff;
  if (view.single()) {
    w.line(w.bold("memtrack check"));
    w.field("recording", view.head_file);
    w.field("command", df::command_line(diff.head->header.command));
  } else {
    w.line(w.bold("memtrack diff"));
    w.field("base", view.base_file);
    w.field("head", view.head_file);
    w.field("command", df::command_line(diff.head->header.command));
  }
  for (const std::string& note : diff.notes) w.warning("  note: ", note);
  for (const std::string& warning : view.base_warnings) w.warning("  base: warning: ", warning);
  for (const std::string& warning : view.head_warnings)
    w.warning(view.single() ? "  warning: " : "  head: warning: ", warning);
  write_budgets(view, w);
  write_totals(view, w);
  write_processes(view, w);
  write_sites(view, w);
}

}  // namespace memtrack
