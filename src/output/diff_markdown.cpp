// `memtrack diff` and `memtrack check` as GitHub-flavoured markdown, for a
// pull-request comment or a CI job summary ($GITHUB_STEP_SUMMARY): the
// verdict and the broken budgets first, a table of totals, the processes,
// the largest changes of call paths with their stacks folded away.
#include <fmt/format.h>

#include "output/diff_output.h"
#include "output/utf8.h"

namespace memtrack {
namespace {

namespace df = diff_format;

constexpr size_t kMarkdownFramesShown = 12;

// Inside a table cell and a code span: no pipe, backtick or line break may
// end either early.
std::string code(std::string_view text) {
  std::string out = "`";
  for (char c : valid_utf8(text)) {
    if (c == '`') out += '\'';
    else if (c == '|') out += "\\|";
    else if (c == '\n' || c == '\r') out += ' ';
    else out += c;
  }
  return out + "`";
}

void write_budgets(const DiffView& view, std::ostream& out) {
  if (view.budgets.empty()) return;
  for (const BudgetResult* budget : df::budgets_broken_first(view)) {
    const BudgetResult& r = *budget;
    const char* mark = r.broken ? "❌" : !r.error.empty() ? "⚠️" : "✅";
    out << fmt::format("- {} {}{}", mark, r.budget->kind == Budget::Kind::Max ? "max " : "", code(r.budget->text));
    if (!r.error.empty()) out << ": cannot be evaluated: " << valid_utf8(r.error);
    if (r.broken) out << ":";
    out << "\n";
    for (const BudgetViolation& v : r.violations)
      out << fmt::format("  - {}: {}\n", valid_utf8(df::subject(v, view.single())),
                         df::violation(*r.budget, v, view.single()));
  }
  out << "\n";
}

void write_totals(const DiffView& view, std::ostream& out) {
  const RecordingDiff& diff = *view.diff;
  if (view.single()) {
    out << "| | value |\n|---|---:|\n";
    for (const FigureInfo& info : all_figures())
      out << fmt::format("| {} | {} |\n", info.title, df::value(info.figure, diff.total_change(info.figure).head));
    out << "\n";
    return;
  }
  out << "| | base | head | change | |\n|---|---:|---:|---:|---:|\n";
  for (const FigureInfo& info : all_figures()) {
    FigureChange c = diff.total_change(info.figure);
    if (!c.base && !c.head) continue;  // not recorded in either run
    std::string delta = df::change(info.figure, c);
    bool changed = !delta.empty() && delta != "0";
    out << fmt::format("| {} | {} | {} | {} | {} |\n", info.title, df::value(info.figure, c.base),
                       df::value(info.figure, c.head), changed ? "**" + delta + "**" : delta, df::relative(c));
  }
  out << "\n";
}

void write_processes(const DiffView& view, std::ostream& out) {
  const RecordingDiff& diff = *view.diff;
  if (diff.processes.size() < 2 || view.single()) return;
  out << "<details><summary>Processes (" << diff.processes.size() << ")</summary>\n\n";
  out << "| process | allocated | peak | leaked |\n|---|---:|---:|---:|\n";
  for (const ProcessMatch& p : diff.processes) {
    std::string label = code(p.name) + (!p.base ? " (new)" : !p.head ? " (gone)" : "");
    // Non-breaking spaces keep the tree's indentation in a table cell.
    std::string indent;
    for (size_t i = 0; i < std::min<size_t>(p.depth, 6); ++i) indent += "&nbsp;&nbsp;";
    auto cell = [&](Figure f) {
      FigureChange c = p.change(f);
      std::string delta = df::change(f, c);
      std::string rel = df::relative(c);
      return delta + (rel.empty() ? "" : " (" + rel + ")");
    };
    out << fmt::format("| {}{} | {} | {} | {} |\n", indent, label, cell(Figure::Allocated), cell(Figure::Peak),
                       cell(Figure::Leaked));
  }
  out << "\n</details>\n\n";
}

void write_sites(const DiffView& view, std::ostream& out) {
  const RecordingDiff& diff = *view.diff;
  if (view.single() || !diff.sites_compared) return;
  const df::SiteCounts counts = df::site_counts(diff);
  std::vector<size_t> changed_all = diff.ranked_changes(view.by, 0);
  std::vector<size_t> shown = diff.ranked_changes(view.by, view.top);
  out << fmt::format("#### Call paths by {}\n\n{} changed, {} matched, {} new, {} gone.\n\n", df::cost_title(view.by),
                     changed_all.size(), counts.matched, counts.added, counts.gone);
  if (shown.empty()) return;
  const Figure figure = df::cost_figure(view.by);
  out << "| | allocating function | base | head | change | |\n|---|---|---:|---:|---:|---:|\n";
  for (size_t rank = 0; rank < shown.size(); ++rank) {
    const SiteDiff& s = diff.sites[shown[rank]];
    FigureChange c = s.change(view.by);
    std::string rel = df::relative(c);
    out << fmt::format("| {} | {}{} | {} | {} | {} | {} |\n", rank + 1, code(s.allocating_function),
                       !s.in_base() ? " (new)" : !s.in_head() ? " (gone)" : "", df::value(figure, c.base),
                       df::value(figure, c.head), df::change(figure, c), rel == "new" ? "" : rel);
  }
  out << "\n<details><summary>Their call paths</summary>\n\n";
  for (size_t rank = 0; rank < shown.size(); ++rank) {
    const SiteDiff& s = diff.sites[shown[rank]];
    out << fmt::format("{}. {} {}\n\n   ```\n", rank + 1, code(s.allocating_function),
                       df::change(figure, s.change(view.by)));
    for (size_t i = 0; i < s.frames.size() && i < kMarkdownFramesShown; ++i) {
      std::string line = valid_utf8(df::frame_line(s.frames[i]));
      // A fence inside the block would end it.
      for (size_t at = line.find("```"); at != std::string::npos; at = line.find("```")) line.replace(at, 3, "'''");
      out << "   " << line << "\n";
    }
    if (s.frames.size() > kMarkdownFramesShown) out << fmt::format("   ... {} more frames\n", s.frames.size() - kMarkdownFramesShown);
    out << "   ```\n\n";
  }
  out << "</details>\n\n";
}

}  // namespace

void write_diff_markdown(const DiffView& view, std::ostream& out) {
  const RecordingDiff& diff = *view.diff;
  const size_t broken = view.broken_budgets();
  const size_t errors = df::unevaluable_budgets(view);
  std::string verdict = view.budgets.empty() ? ""
                        : broken            ? fmt::format(": ❌ {} of {} budgets broken", broken, view.budgets.size())
                        : errors            ? fmt::format(": ⚠️ {} budgets cannot be evaluated", errors)
                                            : fmt::format(": ✅ {} budgets held", view.budgets.size());
  out << fmt::format("### memtrack {}{}\n\n", view.single() ? "check" : "diff", verdict);
  out << "Command: " << code(df::command_line(diff.head->header.command)) << "\n\n";
  for (const std::string& note : diff.notes) out << "> **Note:** " << valid_utf8(note) << "\n\n";
  for (const std::string& warning : view.base_warnings) out << "> **Base:** " << valid_utf8(warning) << "\n\n";
  for (const std::string& warning : view.head_warnings)
    out << "> **" << (view.single() ? "Warning" : "Head") << ":** " << valid_utf8(warning) << "\n\n";
  write_budgets(view, out);
  write_totals(view, out);
  write_processes(view, out);
  write_sites(view, out);
}

}  // namespace memtrack
