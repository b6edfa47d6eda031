#include "output/text/profile_text.h"

#include <fmt/format.h>

#include "analyze/call_tree.h"
#include "output/text/text_writer.h"
#include "output/text/units.h"
#include "util/file_name.h"

namespace memtrack {
namespace {

using text::fit;
using text::kLineWidth;
using text::TextWriter;

constexpr size_t kFramesPerSite = 16;  // the JSON output has them all
// Deeper levels are indented no further (their depth is printed instead), so
// that the label keeps at least 25 columns.
constexpr size_t kTreeIndentLimit = 16;

// The peak cost is what was live at `report --at T` when given.
std::string cost_description(CostKind cost, const Profile& profile) {
  switch (cost) {
    case CostKind::Bytes: return "bytes allocated";
    case CostKind::Count: return "allocation count";
    case CostKind::Peak:
      return profile.live_at_ns ? "memory live at " + format_duration(*profile.live_at_ns) : "memory live at the peak";
    case CostKind::Leaked: return "leaked bytes";
    case CostKind::LiveAtEnd: return "bytes live at the end of the recording";
    case CostKind::Temporary: return "temporary allocations";
  }
  return "?";
}

std::string format_cost(CostKind cost, uint64_t value) {
  bool bytes = cost == CostKind::Bytes || cost == CostKind::Peak || cost == CostKind::Leaked ||
               cost == CostKind::LiveAtEnd;
  return bytes ? format_bytes(value) : format_count(value, 10);
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
  // Live at end only where the recording ended before the process.
  std::string live_at_end = c.live_at_end_allocations > 0 ? "; live at end " + format_bytes(c.live_at_end_bytes) : "";
  std::string figures = fmt::format("{} allocs, {}; {} {}; leaked {}{}; {} temporary", format_count(c.allocations, 10),
                                    format_bytes(c.allocated_bytes),
                                    profile.live_at_ns ? "at " + format_duration(*profile.live_at_ns) : "peak",
                                    format_bytes(c.peak_bytes), format_bytes(c.leaked_bytes), live_at_end,
                                    format_count(c.temporary_allocations, 10));
  w.line();
  w.line(w.bold(head));
  w.line("    " + fit(figures, kLineWidth - 4));
  size_t shown = 0, frames = 0;
  for (uint32_t index : site.locations) {
    const ProfileLocation& location = profile.locations[index];
    std::vector<std::string> labels = frame_labels(profile, location, FrameNaming::CallSite);
    for (size_t i = 0; i < labels.size(); ++i, ++frames) {
      if (shown == kFramesPerSite) continue;
      ++shown;
      std::string where;
      if (i < location.frames.size() && !location.frames[i].file.empty())
        where = fmt::format("{}:{}", file_name_of(location.frames[i].file), location.frames[i].line);
      else if (location.module >= 0)
        where = file_name_of(profile.modules[static_cast<size_t>(location.module)].path);
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
                                                   : "    [no stack: recorded with --no-stacks]");
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

// A path's callers from the allocating function outwards: "caller:LINE",
// "caller+0x1f" or "[lib.so+0x2345]"; a path cut short ends in "[truncated]".
std::vector<std::string> caller_labels(const Profile& profile, const ProfileSite& site) {
  std::vector<SiteFrame> frames = site_frames(profile, site);
  std::vector<std::string> labels;
  for (size_t i = allocating_frame_index(frames) + 1; i < frames.size(); ++i) {
    labels.push_back(frame_label(profile, frames[i], FrameNaming::CallSite));
    // A Python frame's label has its line already.
    if (frames[i].frame && frames[i].frame->line > 0 && !frames[i].location->python)
      labels.back() += fmt::format(":{}", frames[i].frame->line);
  }
  if (site_is_truncated(site)) labels.push_back(kTruncatedLabel);
  return labels;
}

// "< a < b < c", cut at the width. The callers it shares with the group's
// first path are left out ("(2 callers as above) < c"), so that two paths
// never print alike because the line was cut.
std::string callers_line(const std::vector<std::string>& labels, const std::vector<std::string>& first,
                         size_t width) {
  if (labels.empty()) return "(the outermost frame)";
  size_t shared = 0;
  if (&labels != &first)
    while (shared < labels.size() && shared < first.size() && labels[shared] == first[shared]) ++shared;
  if (shared == labels.size()) shared = 0;  // nothing new: show it whole
  std::string text = shared > 0 ? fmt::format("({} as above)", count_of(shared, "caller")) : "";
  for (size_t i = shared; i < labels.size() && text.size() <= width; ++i)
    text += (text.empty() ? "< " : " < ") + labels[i];
  return fit(text, width);
}

// The allocating functions by one cost, each with its largest call paths.
void write_groups(TextWriter& w, const Profile& profile, const std::vector<FunctionGroup>& groups, CostKind cost,
                  uint64_t total, size_t paths_per_group) {
  for (size_t rank = 0; rank < groups.size(); ++rank) {
    const FunctionGroup& group = groups[rank];
    uint64_t value = cost_of(group.costs, cost);
    std::string head = fmt::format("{:>3}. {:>10} {:>5.1f}% ", rank + 1, format_cost(cost, value), percent(value, total));
    std::string paths = group.sites.size() == 1 ? "" : "  (" + count_of(group.sites.size(), "call path") + ")";
    size_t room = kLineWidth - std::min(head.size() + paths.size(), kLineWidth);
    w.line(w.bold(head + fit(group.function, room)) + paths);
    std::vector<std::string> first;
    for (size_t i = 0; i < std::min(paths_per_group, group.sites.size()); ++i) {
      const ProfileSite& site = profile.sites[group.sites[i]];
      if (site.locations.empty()) break;  // "[no stack]": nothing more to show
      std::vector<std::string> labels = caller_labels(profile, site);
      if (i == 0) first = labels;
      std::string prefix = fmt::format("     {:>10}  ", format_cost(cost, cost_of(site.costs, cost)));
      w.line(prefix + callers_line(labels, i == 0 ? labels : first, kLineWidth - prefix.size()));
    }
  }
}

std::string describe_outcomes(const Profile& profile) {
  uint64_t allocations = 0;
  for (int i = 0; i < kStackOutcomeCount; ++i) allocations += profile.allocations_by_outcome[i];
  std::string text;
  for (int i = 0; i < kStackOutcomeCount; ++i) {
    uint64_t a = profile.allocations_by_outcome[i];
    if (a == 0) continue;
    text += fmt::format("{}{} {:.1f}%", text.empty() ? "" : ", ", stack_outcome_name(static_cast<StackOutcome>(i)),
                        percent(a, allocations));
  }
  return text;
}

}  // namespace

void write_profile_text(const ProfileView& view, std::ostream& out, bool color, bool verbose) {
  const Profile& profile = *view.profile;
  TextWriter w(out, color);
  uint64_t with_stack = 0, stack_definitions = 0;
  for (int i = 0; i < kStackOutcomeCount; ++i) {
    if (static_cast<StackOutcome>(i) != StackOutcome::NoStack) with_stack += profile.allocations_by_outcome[i];
    stack_definitions += profile.definitions_by_outcome[i];
  }
  if (!view.filter_note.empty()) {
    w.title("Allocating functions");
    w.warning("  ", view.filter_note);
    return;
  }
  if (with_stack == 0 && stack_definitions == 0) {
    w.title("Allocating functions");
    w.line("  none: the recording has no call paths (recorded with --no-stacks)");
    return;
  }
  if (verbose) write_outcomes(w, profile);

  uint64_t total = cost_of(profile.totals, view.by);
  size_t with_cost = ranked_sites(profile, view.by, 0).size();
  std::vector<FunctionGroup> groups = group_by_allocating_function(profile, view.by, 0);
  size_t group_count = groups.size();
  if (view.top != 0 && groups.size() > view.top) groups.resize(view.top);
  w.title(fmt::format("Top {} of {} allocating functions by {}", groups.size(), format_thousands(group_count),
                      cost_description(view.by, profile)));
  w.line(fmt::format("  total {} in {}", format_cost(view.by, total), count_of(with_cost, "call path")));
  w.line(fit("  call paths end: " + describe_outcomes(profile), kLineWidth));
  if (groups.empty()) w.line("  (none)");
  constexpr size_t kPathsPerGroup = 2;
  write_groups(w, profile, groups, view.by, total, kPathsPerGroup);

  // Leaks have a section of their own unless they are the ranking already.
  if (view.by != CostKind::Leaked && profile.totals.leaked_allocations > 0) {
    constexpr size_t kLeakGroups = 5;
    std::vector<FunctionGroup> leaks = group_by_allocating_function(profile, CostKind::Leaked, 0);
    size_t leak_groups = leaks.size();
    if (leaks.size() > kLeakGroups) leaks.resize(kLeakGroups);
    w.title(fmt::format("Leaks: {} in {}; top {} of {} allocating functions",
                        format_bytes(profile.totals.leaked_bytes), count_of(profile.totals.leaked_allocations, "block"),
                        leaks.size(), leak_groups));
    write_groups(w, profile, leaks, CostKind::Leaked, profile.totals.leaked_bytes, 1);
  }
  // So have the blocks of processes the recording ended before: not leaks.
  if (view.by != CostKind::LiveAtEnd && profile.totals.live_at_end_allocations > 0) {
    constexpr size_t kLiveGroups = 5;
    std::vector<FunctionGroup> live = group_by_allocating_function(profile, CostKind::LiveAtEnd, 0);
    size_t live_groups = live.size();
    if (live.size() > kLiveGroups) live.resize(kLiveGroups);
    w.title(fmt::format("Live at end, not leaks: {} in {}; top {} of {} allocating functions",
                        format_bytes(profile.totals.live_at_end_bytes),
                        count_of(profile.totals.live_at_end_allocations, "block"), live.size(), live_groups));
    write_groups(w, profile, live, CostKind::LiveAtEnd, profile.totals.live_at_end_bytes, 1);
  }
  if (profile.suppressed_leaked_allocations > 0)
    w.line(fmt::format("\n{} leaked in {} allocations matched a suppression and are not counted above",
                       format_bytes(profile.suppressed_leaked_bytes),
                       format_count(profile.suppressed_leaked_allocations, 12)));
  if (profile.runtime_leaked_allocations > 0) {
    w.line();
    for (const std::string& line :
         text::wrap(fmt::format("{} held by the C/C++ runtime ({}) not counted above: see "
                                "--show-runtime-leaks",
                                count_of(profile.runtime_leaked_allocations, "block"),
                                format_bytes(profile.runtime_leaked_bytes)),
                    kLineWidth))
      w.line(line);
  }

  if (verbose) {
    std::vector<size_t> ranked = ranked_sites(profile, view.by, view.top);
    w.title(fmt::format("Top {} of {} call paths by {} (total {})", ranked.size(), with_cost,
                        cost_description(view.by, profile), format_cost(view.by, total)));
    for (size_t rank = 0; rank < ranked.size(); ++rank)
      write_site(w, profile, profile.sites[ranked[rank]], rank + 1, view.by, total);
  }

  if (view.tree) {
    CallTreeNode root = build_call_tree(profile, view.by, *view.tree);
    w.title(fmt::format("Call tree, {}, by {} (nodes under {:.1f}% left out)",
                        *view.tree == TreeDirection::TopDown ? "top-down" : "bottom-up", cost_description(view.by, profile),
                        view.tree_threshold_percent));
    write_tree(w, root, root.cost, view.by, view.tree_threshold_percent, 0);
  }
  if (profile.warnings.empty()) return;
  if (verbose) {
    w.title("Symbolization and unwinding warnings");
    for (const std::string& warning : profile.warnings) w.warning("  - ", warning);
  } else {
    w.line();
    w.warning("", fmt::format("{} symbolization and unwinding warnings (files not found or without debug "
                              "information): --verbose lists them",
                              profile.warnings.size()));
  }
}

}  // namespace memtrack
