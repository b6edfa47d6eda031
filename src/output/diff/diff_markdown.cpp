// `memtrack diff` and `memtrack check` as GitHub-flavoured markdown, for a
// pull-request comment or a CI job summary ($GITHUB_STEP_SUMMARY): the
// verdict and the broken budgets first, a table of totals, the processes,
// the largest changes of call paths with their stacks folded away.
#include <fmt/format.h>

#include "output/diff/diff_output.h"
#include "output/utf8.h"

namespace memtrack {
namespace {

namespace df = diff_format;

constexpr size_t kMarkdownFramesShown = 12;

// Every string from a recording (commands, process and function names,
// paths, and the warnings that quote them) is shown in a code span: markdown
// and HTML inside it are text, and GitHub makes no link or @mention of it.
// Inside a table cell and a code span: no pipe, backtick or line break may
// end either early; other control characters become spaces too.
std::string code(std::string_view text) {
  std::string out = "`";
  for (char c : valid_utf8(text)) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '`') out += '\'';
    else if (c == '|') out += "\\|";
    else if (byte < 0x20 || byte == 0x7f) out += ' ';
    else out += c;
  }
  return out + "`";
}

// memtrack's own prose (the notes), should a string from a
// recording or the command line get into it: on one line (never the start of
// a block), inline markup escaped, `<`, `>` and `&` as entities.
std::string text(std::string_view prose) {
  static constexpr std::string_view kEscaped = "\\`*_[]!|~#";
  std::string out;
  for (char c : valid_utf8(prose)) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (byte < 0x20 || byte == 0x7f) out += ' ';
    else if (kEscaped.find(c) != std::string_view::npos) out += {'\\', c};
    else out += c;
  }
  return out;
}

// A line of a fenced code block: one line, and no fence that would end the
// block.
std::string fenced_line(std::string_view line) {
  std::string out;
  for (char c : valid_utf8(line)) {
    const auto byte = static_cast<unsigned char>(c);
    out += byte < 0x20 || byte == 0x7f ? ' ' : c;
  }
  for (size_t at = out.find("```"); at != std::string::npos; at = out.find("```")) out.replace(at, 3, "'''");
  return out;
}

// diff_format::subject with the process's name in a code span.
std::string subject(const BudgetViolation& v, bool single) {
  if (!v.process) return "total";
  const ProcessMatch& p = *v.process;
  std::string pids = single || (p.base && p.head && p.base->pid == p.head->pid) ? fmt::format("pid {}", p.head->pid)
                     : p.base && p.head ? fmt::format("pid {} -> {}", p.base->pid, p.head->pid)
                     : p.head           ? fmt::format("pid {}, head only", p.head->pid)
                                        : fmt::format("pid {}, base only", p.base->pid);
  return fmt::format("process {} ({})", code(p.name), pids);
}

void write_budgets(const DiffView& view, std::ostream& out) {
  if (view.budgets.empty()) return;
  for (const BudgetResult* budget : df::budgets_broken_first(view)) {
    const BudgetResult& r = *budget;
    const char* mark = r.broken ? "❌" : !r.error.empty() ? "⚠️" : "✅";
    out << fmt::format("- {} {}{}", mark, r.budget->kind == Budget::Kind::Max ? "max " : "", code(r.budget->text));
    // The reason may quote process names from the recordings.
    if (!r.error.empty()) out << ": cannot be evaluated: " << code(r.error);
    if (r.broken) out << ":";
    out << "\n";
    for (const BudgetViolation& v : r.violations)
      out << fmt::format("  - {}: {}\n", subject(v, view.single()), df::violation(*r.budget, v, view.single()));
  }
  out << "\n";
}

void write_totals(const DiffView& view, std::ostream& out) {
  const RecordingDiff& diff = *view.diff;
  if (view.single()) {
    out << "| | value |\n|---|---:|\n";
    for (const FigureInfo& info : all_figures())
      if (df::totals_row(info.figure, diff.total_change(info.figure)))
        out << fmt::format("| {} | {} |\n", info.title, df::value(info.figure, diff.total_change(info.figure).head));
    out << "\n";
    return;
  }
  out << "| | base | head | change | |\n|---|---:|---:|---:|---:|\n";
  for (const FigureInfo& info : all_figures()) {
    FigureChange c = diff.total_change(info.figure);
    if (!c.base && !c.head) continue;  // not recorded in either run
    if (!df::totals_row(info.figure, c)) continue;
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
      out << "   " << fenced_line(df::frame_line(s.frames[i])) << "\n";
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
  for (size_t i = 0; i < diff.notes.size(); ++i) {
    if (diff.commands_note == i && diff.base)  // the command lines quoted as code
      out << "> **Note:** the recordings ran different commands: base "
          << code(df::command_line(diff.base->header.command)) << ", head "
          << code(df::command_line(diff.head->header.command)) << "\n\n";
    else
      out << "> **Note:** " << text(diff.notes[i]) << "\n\n";
  }
  // Warnings quote paths and names from the recordings.
  for (const std::string& warning : view.base_warnings) out << "> **Base:** " << code(warning) << "\n\n";
  for (const std::string& warning : view.head_warnings)
    out << "> **" << (view.single() ? "Warning" : "Head") << ":** " << code(warning) << "\n\n";
  write_budgets(view, out);
  write_totals(view, out);
  write_processes(view, out);
  write_sites(view, out);
}

}  // namespace memtrack
