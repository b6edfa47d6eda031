#include <fmt/format.h>

#include <array>
#include <cmath>

#include "output/diff_output.h"
#include "output/units.h"

namespace memtrack {

namespace {

const DiffOutputFormat kText{"text", "for a terminal: 80 columns, broken budgets first", &write_diff_text};
const DiffOutputFormat kMarkdown{"markdown", "for a pull-request comment or a CI job summary",
                                 [](const DiffView& view, std::ostream& sink, bool) { write_diff_markdown(view, sink); }};
const DiffOutputFormat kJson{"json", "the stable schema of docs/REPORT.md",
                             [](const DiffView& view, std::ostream& sink, bool) { write_diff_json(view, sink); }};
constexpr std::array<const DiffOutputFormat*, 3> kDiffOutputs = {&kText, &kMarkdown, &kJson};

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

const char* cost_title(CostKind cost) {
  switch (cost) {
    case CostKind::Bytes: return "bytes allocated";
    case CostKind::Count: return "allocations";
    case CostKind::Peak: return "bytes at the peak";
    case CostKind::Leaked: return "bytes leaked";
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
    case CostKind::Temporary: return Figure::Temporary;
  }
  return Figure::Allocated;  // not reached
}

}  // namespace diff_format
}  // namespace memtrack
