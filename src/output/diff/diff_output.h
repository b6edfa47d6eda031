// Outputs of `memtrack diff` and `memtrack check`: text for a terminal,
// markdown for a pull-request comment or a CI job summary, and JSON (schema
// in docs/REPORT.md, "memtrack diff"). `check` is a diff without a base.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <ostream>
#include <string>
#include <vector>

#include "analyze/budget.h"
#include "analyze/cost_kind.h"
#include "analyze/recording_diff.h"

namespace memtrack {

inline constexpr int kDiffFormatVersion = 1;

struct DiffView {
  const RecordingDiff* diff = nullptr;
  std::string base_file;  // "" for check
  std::string head_file;  // the recording, for check
  CostKind by = CostKind::Bytes;
  size_t top = 10;  // changed sites shown; 0: all
  std::vector<BudgetResult> budgets;
  // Reader warnings of each run (damaged or incomplete artifacts).
  std::vector<std::string> base_warnings, head_warnings;

  size_t broken_budgets() const;
  bool single() const { return diff->base == nullptr; }
};

void write_diff_text(const DiffView& view, std::ostream& out, bool color);
void write_diff_markdown(const DiffView& view, std::ostream& out);
void write_diff_json(const DiffView& view, std::ostream& out);
// The JSON document on one line (the HTML page embeds it), listing at most
// `top` changed sites (0: all) instead of the view's.
std::string compact_diff_json(const DiffView& view, size_t top);
// One self-contained page (html/diff.*): the JSON document (its 500 largest
// changes of call paths, whatever `top` says) and call trees carrying both
// runs' costs, for a differential flame graph.
void write_diff_html(const DiffView& view, std::ostream& out);
// The data that page embeds, as compact JSON: {"diff": the document, "figures"
// ([name, title, bytes] in the outputs' order), "costs",
// "by", "sites_limit", "prune_percent", "pruned_nodes", "trees" (null when
// the call paths were not compared), "frames"}.
std::string diff_html_data(const DiffView& view);

// The outputs of diff and check, as a registry the CLI (--format, --help)
// reads.
struct DiffOutputFormat {
  std::string_view name;     // --format NAME
  std::string_view summary;  // for --help
  // `color`: the sink is a terminal, ANSI colors allowed.
  void (*write)(const DiffView& view, std::ostream& sink, bool color) = nullptr;
};
// Every output, the default (text) first.
std::span<const DiffOutputFormat* const> diff_output_formats();
// nullptr for a name no output has.
const DiffOutputFormat* find_diff_output_format(std::string_view name);

// Shared wording of the three outputs.
namespace diff_format {
// "1.50 MiB" or "1,234"; "-" when unknown.
std::string value(Figure figure, std::optional<uint64_t> value);
// "+1.50 MiB", "-12", "0"; "" when unknown.
std::string change(Figure figure, const FigureChange& values);
// "+5.0%", "-0.3%", "new" (from 0), "" when unchanged or unknown.
std::string relative(const FigureChange& values);
// "total" or "process fx_diff (pid 123 -> 456)".
std::string subject(const BudgetViolation& violation, bool single);
// "peak 1.00 MiB -> 1.10 MiB (+10.0%)" for a diff, "peak 1.00 MiB" for check.
std::string violation(const Budget& budget, const BudgetViolation& violation, bool single);
// Whether the totals list `figure`: the live-at-end figures only where a
// run has blocks live at end (a recording that ended before a process).
bool totals_row(Figure figure, const FigureChange& values);
// The title of the site costs: "bytes allocated", "allocations", ...
const char* cost_title(CostKind cost);
// A cost's figure for formatting (bytes or a count).
Figure cost_figure(CostKind cost);
// The words of a command line joined by spaces.
std::string command_line(const std::vector<std::string>& words);
// The budgets in the order outputs list them: broken, then those that
// cannot be evaluated, then those that held (each in command-line order).
std::vector<const BudgetResult*> budgets_broken_first(const DiffView& view);
size_t unevaluable_budgets(const DiffView& view);
// How the sites' keys fell: in both runs, in the head only, in the base only.
struct SiteCounts {
  size_t matched = 0, added = 0, gone = 0;
};
SiteCounts site_counts(const RecordingDiff& diff);
// "(inlined) grow  app.c:15": a frame of a changed site, its file without directories.
std::string frame_line(const DiffFrame& frame);
}  // namespace diff_format

}  // namespace memtrack
