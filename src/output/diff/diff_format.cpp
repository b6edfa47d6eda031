#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "output/diff/diff_output.h"
#include "output/text/units.h"

namespace memtrack {

namespace {

const DiffOutputFormat kText{"text", "for a terminal: 80 columns, broken budgets first", &write_diff_text};
const DiffOutputFormat kMarkdown{"markdown", "for a pull-request comment or a CI job summary",
                                 [](const DiffView& view, std::ostream& sink, bool) { write_diff_markdown(view, sink); }};
const DiffOutputFormat kJson{"json", "the stable schema of docs/REPORT.md",
                             [](const DiffView& view, std::ostream& sink, bool) { write_diff_json(view, sink); }};
const DiffOutputFormat kHtml{"html", "one self-contained page with a differential flame graph (open in a browser)",
                             [](const DiffView& view, std::ostream& sink, bool) { write_diff_html(view, sink); }};
constexpr std::array<const DiffOutputFormat*, 4> kDiffOutputs = {&kText, &kJson, &kMarkdown, &kHtml};

}  // namespace

std::span<const DiffOutputFormat* const> diff_output_formats() { return kDiffOutputs; }

const DiffOutputFormat* find_diff_output_format(std::string_view name) {
  for (const DiffOutputFormat* format : kDiffOutputs)
    if (format->name == name) return format;
  return nullptr;
}

size_t DiffView::broken_budgets() const {
  size_t broken = 0;
  for (const BudgetResult& result : budgets) broken += result.broken ? 1 : 0;
  return broken;
}

namespace diff_format {

std::string value(Figure figure, std::optional<uint64_t> value) {
  if (!value) return "-";
  return figure_info(figure).bytes ? format_bytes(*value) : format_thousands(*value);
}

std::string change(Figure figure, const FigureChange& values) {
  if (!values.base || !values.head) return "";
  if (*values.base == *values.head) return "0";
  const bool up = *values.head > *values.base;
  const uint64_t magnitude = up ? *values.head - *values.base : *values.base - *values.head;
  return (up ? "+" : "-") + diff_format::value(figure, magnitude);
}

std::string relative(const FigureChange& values) {
  auto percent = values.relative_percent();
  if (!percent || *percent == 0) return "";
  if (std::isinf(*percent)) return "new";
  // Small changes keep a significant digit: "-0.04%", not "-0.0%".
  const double p = static_cast<double>(*percent);
  return std::fabs(p) < 0.095 ? fmt::format("{:+.2f}%", p) : fmt::format("{:+.1f}%", p);
}

std::string subject(const BudgetViolation& violation, bool single) {
  if (!violation.process) return "total";
  const ProcessMatch& p = *violation.process;
  if (single) return fmt::format("process {} (pid {})", p.name, p.head->pid);
  if (p.base && p.head)
    return p.base->pid == p.head->pid ? fmt::format("process {} (pid {})", p.name, p.head->pid)
                                      : fmt::format("process {} (pid {} -> {})", p.name, p.base->pid, p.head->pid);
  return p.head ? fmt::format("process {} (pid {}, head only)", p.name, p.head->pid)
                : fmt::format("process {} (pid {}, base only)", p.name, p.base->pid);
}

std::string violation(const Budget& budget, const BudgetViolation& v, bool single) {
  const char* name = figure_info(budget.figure).name;
  if (single) return fmt::format("{} {}", name, value(budget.figure, v.values.head));
  std::string rel = relative(v.values);
  std::string delta = change(budget.figure, v.values);
  return fmt::format("{} {} -> {} ({}{}{})", name, value(budget.figure, v.values.base),
                     value(budget.figure, v.values.head), delta.empty() ? "?" : delta, rel.empty() ? "" : ", ", rel);
}

bool totals_row(Figure figure, const FigureChange& values) {
  if (figure != Figure::LiveAtEnd && figure != Figure::LiveAtEndBlocks) return true;
  return values.base.value_or(0) > 0 || values.head.value_or(0) > 0;
}

const char* cost_title(CostKind cost) {
  switch (cost) {
    case CostKind::Bytes: return "bytes allocated";
    case CostKind::Count: return "allocations";
    case CostKind::Peak: return "bytes at the peak";
    case CostKind::Leaked: return "bytes leaked";
    case CostKind::LiveAtEnd: return "bytes live at end";
    case CostKind::Temporary: return "temporary allocations";
  }
  return "?";  // not reached
}

Figure cost_figure(CostKind cost) {
  switch (cost) {
    case CostKind::Bytes: return Figure::Allocated;
    case CostKind::Count: return Figure::AllocCalls;
    case CostKind::Peak: return Figure::Peak;
    case CostKind::Leaked: return Figure::Leaked;
    case CostKind::LiveAtEnd: return Figure::LiveAtEnd;
    case CostKind::Temporary: return Figure::Temporary;
  }
  return Figure::Allocated;  // not reached
}

std::string command_line(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

std::vector<const BudgetResult*> budgets_broken_first(const DiffView& view) {
  std::vector<const BudgetResult*> ordered;
  for (const BudgetResult& r : view.budgets) ordered.push_back(&r);
  auto rank = [](const BudgetResult* r) { return r->broken ? 0 : !r->error.empty() ? 1 : 2; };
  std::stable_sort(ordered.begin(), ordered.end(),
                   [&](const BudgetResult* a, const BudgetResult* b) { return rank(a) < rank(b); });
  return ordered;
}

size_t unevaluable_budgets(const DiffView& view) {
  size_t errors = 0;
  for (const BudgetResult& r : view.budgets) errors += r.error.empty() ? 0 : 1;
  return errors;
}

SiteCounts site_counts(const RecordingDiff& diff) {
  SiteCounts counts;
  for (const SiteDiff& s : diff.sites) {
    if (s.in_base() && s.in_head()) ++counts.matched;
    else if (s.in_head()) ++counts.added;
    else ++counts.gone;
  }
  return counts;
}

std::string frame_line(const DiffFrame& f) {
  std::string where = f.file.empty() ? "" : fmt::format("  {}:{}", f.file.substr(f.file.rfind('/') + 1), f.line);
  return fmt::format("{}{}{}", f.inlined ? "(inlined) " : "", f.label, where);
}

}  // namespace diff_format
}  // namespace memtrack
