#include "report/profile_text.h"

#include <fmt/format.h>

#include "report/text_writer.h"
#include "report/units.h"

namespace memtrack {
namespace {

using text::fit;
using text::kLineWidth;
using text::TextWriter;

constexpr size_t kFramesPerSite = 16;  // the JSON output has them all
// Deeper levels are indented no further (their depth is printed instead), so
// that the label keeps at least 25 columns.
constexpr size_t kTreeIndentLimit = 16;

const char* cost_description(CostKind cost) {
  switch (cost) {
    case CostKind::Bytes: return "bytes allocated";
    case CostKind::Count: return "allocation count";
    case CostKind::Peak: return "memory live at the peak";
    case CostKind::Leaked: return "leaked bytes";
    case CostKind::Temporary: return "temporary allocations";
  }
  return "?";
}

std::string format_cost(CostKind cost, uint64_t value) {
  bool bytes = cost == CostKind::Bytes || cost == CostKind::Peak || cost == CostKind::Leaked;
  return bytes ? format_bytes(value) : format_count(value, 10);
}

double percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

void write_outcomes(TextWriter& w, const Profile& profile) {
  uint64_t definitions = 0, allocations = 0;
  for (int i = 0; i < kStackOutcomeCount; ++i) {
    definitions += profile.definitions_by_outcome[i];
    allocations += profile.allocations_by_outcome[i];
  }
  w.title("Call paths: how they end");
  w.line(fmt::format("  {:<22}{:>14}{:>14}{:>10}", "", "DEFINITIONS", "ALLOCATIONS", "SHARE"));
  for (int i = 0; i < kStackOutcomeCount; ++i) {
    uint64_t d = profile.definitions_by_outcome[i], a = profile.allocations_by_outcome[i];
    if (d == 0 && a == 0) continue;
    auto outcome = static_cast<StackOutcome>(i);
    std::string row = fmt::format("  {:<22}{:>14}{:>14}{:>9.1f}%", stack_outcome_name(outcome), format_count(d, 14),
                                  format_count(a, 14), percent(a, allocations));
    bool bad = outcome != StackOutcome::Complete && outcome != StackOutcome::NoStack && percent(a, allocations) >= 5;
    w.line(bad ? w.yellow(row) : row);
  }
}

void write_site(TextWriter& w, const Profile& profile, const ProfileSite& site, size_t rank, CostKind cost,
                uint64_t total) {
  const SiteCosts& c = site.costs;
  std::string head = fmt::format("#{} {} ({:.1f}%)", rank, format_cost(cost, cost_of(c, cost)),
                                 percent(cost_of(c, cost), total));
  std::string figures = fmt::format("{} allocs, {}; peak {}; leaked {}; {} temporary", format_count(c.allocations, 10),
                                    format_bytes(c.allocated_bytes), format_bytes(c.peak_bytes),
                                    format_bytes(c.leaked_bytes), format_count(c.temporary_allocations, 10));
  w.line();
  w.line(w.bold(head));
  w.line("    " + fit(figures, kLineWidth - 4));
  size_t shown = 0, frames = 0;
  for (uint32_t index : site.locations) {
    const ProfileLocation& location = profile.locations[index];
    std::vector<std::string> labels = frame_labels(profile, location);
    for (size_t i = 0; i < labels.size(); ++i, ++frames) {
      if (shown == kFramesPerSite) continue;
      ++shown;
      std::string where;
      if (i < location.frames.size() && !location.frames[i].file.empty())
        where = fmt::format("{}:{}", basename_of(location.frames[i].file), location.frames[i].line);
      else if (location.module >= 0)
        where = basename_of(profile.modules[static_cast<size_t>(location.module)].path);
      bool inlined = i < location.frames.size() && location.frames[i].inlined;
      std::string name = (inlined ? "(inline) " : "") + labels[i];
      constexpr size_t kWhereWidth = 26;
      w.line(fmt::format("    {:<{}} {}", fit(name, kLineWidth - 5 - kWhereWidth), kLineWidth - 5 - kWhereWidth,
                         fit(where, kWhereWidth)));
    }
  }
  if (frames > shown) w.line(fmt::format("    ... {} more frames (--format json shows all)", frames - shown));
  if (site.locations.empty())
    w.line(site.outcome == StackOutcome::Undefined ? "    [stack record missing from the artifact]"
                                                   : "    [no stack: record with --stacks]");
  else if (site.outcome != StackOutcome::Complete)
    w.line(w.yellow(fmt::format("    (path ends: {}{})", stack_outcome_name(site.outcome),
                                site.frame_pointer_fallback ? ", partly from frame pointers" : "")));
}

void write_tree(TextWriter& w, const CallTreeNode& node, uint64_t total, CostKind cost, double threshold,
                size_t depth) {
  if (depth > 0) {
    std::string indent(std::min(depth - 1, kTreeIndentLimit) * 2, ' ');
    if (depth - 1 > kTreeIndentLimit) indent += fmt::format("{}> ", depth);
    std::string prefix = fmt::format("  {:>5.1f}% {:>10}  {}", percent(node.cost, total), format_cost(cost, node.cost),
                                     indent);
    w.line(prefix + fit(node.label, kLineWidth - std::min(prefix.size(), kLineWidth)));
  }
  for (const CallTreeNode& c : node.children)
    if (percent(c.cost, total) >= threshold) write_tree(w, c, total, cost, threshold, depth + 1);
}

}  // namespace

void write_profile_text(const ProfileView& view, std::ostream& out, bool color) {
  const Profile& profile = *view.profile;
  TextWriter w(out, color);
  uint64_t with_stack = 0;
  for (int i = 0; i < kStackOutcomeCount; ++i)
    if (static_cast<StackOutcome>(i) != StackOutcome::NoStack) with_stack += profile.allocations_by_outcome[i];
  if (with_stack == 0) {
    w.title("Allocation sites");
    w.line("  none: no call paths were recorded (record with --stacks)");
    return;
  }
  write_outcomes(w, profile);

  uint64_t total = cost_of(profile.totals, view.by);
  std::vector<size_t> ranked = ranked_sites(profile, view.by, view.top);
  size_t with_cost = ranked_sites(profile, view.by, 0).size();
  w.title(fmt::format("Top {} of {} allocation sites by {} (total {})", ranked.size(), with_cost,
                      cost_description(view.by), format_cost(view.by, total)));
  if (ranked.empty()) w.line("  (none)");
  for (size_t rank = 0; rank < ranked.size(); ++rank)
    write_site(w, profile, profile.sites[ranked[rank]], rank + 1, view.by, total);
  if (profile.suppressed_leaked_allocations > 0)
    w.line(fmt::format("\n{} leaked in {} allocations matched a suppression and are not counted above",
                       format_bytes(profile.suppressed_leaked_bytes),
                       format_count(profile.suppressed_leaked_allocations, 12)));

  if (view.tree) {
    CallTreeNode root = build_call_tree(profile, view.by, *view.tree);
    w.title(fmt::format("Call tree, {}, by {} (nodes under {:.1f}% left out)",
                        *view.tree == TreeDirection::TopDown ? "top-down" : "bottom-up", cost_description(view.by),
                        view.tree_threshold_percent));
    write_tree(w, root, root.cost, view.by, view.tree_threshold_percent, 0);
  }
  if (!profile.warnings.empty()) {
    w.title("Symbolization and unwinding warnings");
    for (const std::string& warning : profile.warnings) w.warning("  - ", warning);
  }
}

}  // namespace memtrack
