#include "report/html_report.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "analyze/call_tree.h"
#include "report/html_page.h"
#include "report/json_report.h"

namespace memtrack {
namespace {

using nlohmann::json;

constexpr std::array<CostKind, 5> kCosts = {CostKind::Bytes, CostKind::Count, CostKind::Peak, CostKind::Leaked,
                                            CostKind::Temporary};
using Costs = std::array<uint64_t, kCosts.size()>;

Costs costs_of(const SiteCosts& site) {
  Costs costs{};
  for (size_t i = 0; i < kCosts.size(); ++i) costs[i] = cost_of(site, kCosts[i]);
  return costs;
}

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Frames shown by the page: [label, file, line, module, inlined], each once.
class FrameTable {
 public:
  uint32_t add(const std::string& label, const std::string& file, uint32_t line, const std::string& module,
               bool inlined) {
    auto key = std::make_tuple(label, file, line, module, inlined);
    auto [it, added] = index_.try_emplace(key, static_cast<uint32_t>(rows_.size()));
    if (added) rows_.push_back(json::array({label, file, line, module, inlined ? 1 : 0}));
    return it->second;
  }
  uint32_t add(const Profile& profile, const SiteFrame& frame) {
    const ProfileLocation& location = *frame.location;
    std::string module =
        location.module >= 0 ? basename_of(profile.modules[static_cast<size_t>(location.module)].path) : "";
    std::string label = frame_label(profile, frame, FrameNaming::Function);
    if (!frame.frame) return add(label, "", 0, module, false);
    return add(label, frame.frame->file, frame.frame->line, module, frame.frame->inlined);
  }
  uint32_t add_marker(const std::string& label) { return add(label, "", 0, "", false); }
  json take() { return std::move(rows_); }

 private:
  std::map<std::tuple<std::string, std::string, uint32_t, std::string, bool>, uint32_t> index_;
  json rows_ = json::array();
};

// A call tree carrying every cost; siblings merge by label as in
// build_call_tree, and a node shows the first frame seen with its label.
struct Node {
  uint32_t frame = 0;
  Costs costs{};
  std::vector<Node> children;
  std::unordered_map<std::string, size_t> child_by_label;
};

Node& child_of(Node& parent, const std::string& label, uint32_t frame) {
  auto [it, added] = parent.child_by_label.try_emplace(label, parent.children.size());
  if (added) parent.children.push_back(Node{frame, {}, {}, {}});
  return parent.children[it->second];
}

struct PathStep {
  std::string label;
  uint32_t frame;
};

std::vector<PathStep> site_path(const Profile& profile, const ProfileSite& site, FrameTable& frames) {
  std::vector<PathStep> path;  // innermost first
  for (const SiteFrame& frame : site_frames(profile, site))
    path.push_back({frame_label(profile, frame, FrameNaming::Function), frames.add(profile, frame)});
  if (path.empty()) {
    std::string label = site.outcome == StackOutcome::Undefined ? "[stack record missing]" : "[no stack]";
    path.push_back({label, frames.add_marker(label)});
  }
  if (site_is_truncated(site)) path.push_back({kTruncatedLabel, frames.add_marker(kTruncatedLabel)});
  return path;
}

bool above_threshold(const Costs& costs, const Costs& root) {
  for (size_t i = 0; i < costs.size(); ++i)
    if (costs[i] > 0 && static_cast<double>(costs[i]) * 100.0 >= static_cast<double>(root[i]) * kHtmlPrunePercent)
      return true;
  return false;
}

json costs_json(const Costs& costs) { return json(std::vector<uint64_t>(costs.begin(), costs.end())); }

// [frame, [costs], [children]], children costliest first in the report's
// cost; those below the threshold in every cost become one "[other]" node.
json pruned_tree_json(const Node& node, const Costs& root, size_t by, uint32_t other_frame, uint64_t* pruned) {
  std::vector<const Node*> kept;
  Costs other{};
  bool has_other = false;
  for (const Node& child : node.children) {
    if (above_threshold(child.costs, root)) {
      kept.push_back(&child);
    } else {
      for (size_t i = 0; i < other.size(); ++i) other[i] += child.costs[i];
      has_other = true;
      ++*pruned;
    }
  }
  std::stable_sort(kept.begin(), kept.end(), [&](const Node* a, const Node* b) { return a->costs[by] > b->costs[by]; });
  json children = json::array();
  for (const Node* child : kept) children.push_back(pruned_tree_json(*child, root, by, other_frame, pruned));
  if (has_other) children.push_back(json::array({other_frame, costs_json(other), json::array()}));
  return json::array({node.frame, costs_json(node.costs), std::move(children)});
}

json tree_json(const Profile& profile, TreeDirection direction, size_t by, FrameTable& frames, uint64_t* pruned) {
  Node root{frames.add_marker("all"), {}, {}, {}};
  for (const ProfileSite& site : profile.sites) {
    Costs costs = costs_of(site.costs);
    if (std::all_of(costs.begin(), costs.end(), [](uint64_t c) { return c == 0; })) continue;
    std::vector<PathStep> path = site_path(profile, site, frames);
    if (direction == TreeDirection::TopDown) std::reverse(path.begin(), path.end());
    Node* node = &root;
    for (size_t i = 0; i < costs.size(); ++i) root.costs[i] += costs[i];
    for (const PathStep& step : path) {
      node = &child_of(*node, step.label, step.frame);
      for (size_t i = 0; i < costs.size(); ++i) node->costs[i] += costs[i];
    }
  }
  return pruned_tree_json(root, root.costs, by, frames.add_marker("[other]"), pruned);
}

// The costliest call paths of each cost, with their frames (innermost first).
json sites_json(const Profile& profile, FrameTable& frames) {
  std::set<size_t> chosen;
  for (CostKind cost : kCosts)
    for (size_t index : ranked_sites(profile, cost, kHtmlSitesPerCost)) chosen.insert(index);
  json sites = json::array();
  for (size_t index : chosen) {
    const ProfileSite& site = profile.sites[index];
    std::vector<SiteFrame> site_frame_list = site_frames(profile, site);
    json frame_ids = json::array();
    for (const SiteFrame& frame : site_frame_list) frame_ids.push_back(frames.add(profile, frame));
    const SiteCosts& c = site.costs;
    sites.push_back({{"costs", costs_json(costs_of(c))},
                     {"leaked_allocations", c.leaked_allocations},
                     {"temporary_bytes", c.temporary_bytes},
                     {"peak_allocations", c.peak_allocations},
                     {"outcome", stack_outcome_name(site.outcome)},
                     {"function", allocating_function(profile, site)},
                     {"frames", std::move(frame_ids)}});
  }
  return sites;
}

bool has_stacks(const Profile& profile) {
  for (int i = 0; i < kStackOutcomeCount; ++i)
    if (profile.definitions_by_outcome[i] > 0) return true;
  for (const ProfileSite& site : profile.sites)
    if (!site.locations.empty()) return true;
  return false;
}

}  // namespace

std::string html_report_data(const Report& report, const ProfileView& view) {
  const Profile& profile = *view.profile;
  size_t by = static_cast<size_t>(std::find(kCosts.begin(), kCosts.end(), view.by) - kCosts.begin());
  FrameTable frames;
  uint64_t pruned = 0;
  json trees = {{"top-down", tree_json(profile, TreeDirection::TopDown, by, frames, &pruned)},
                {"bottom-up", tree_json(profile, TreeDirection::BottomUp, by, frames, &pruned)}};
  json sites = sites_json(profile, frames);
  json costs = json::array();
  for (CostKind cost : kCosts) costs.push_back(cost_kind_name(cost));
  json data = {
      {"costs", std::move(costs)},
      {"by", cost_kind_name(view.by)},
      {"has_stacks", has_stacks(profile)},
      {"prune_percent", kHtmlPrunePercent},
      {"pruned_nodes", pruned},
      {"sites_per_cost", kHtmlSitesPerCost},
      {"sites_with_cost", ranked_sites(profile, CostKind::Count, 0).size()},
      {"sites", std::move(sites)},
      {"trees", std::move(trees)},
      {"frames", frames.take()},
      {"timeline", nullptr},
  };
  // The JSON report's document as is (its own figures, tables and counters).
  std::string document = compact_json_report(report, &view);
  std::string own = data.dump(-1, ' ', false, json::error_handler_t::replace);
  return "{\"report\":" + document + "," + own.substr(1);
}

void write_html_report(const Report& report, const ProfileView& view, std::ostream& out) {
  std::string data = html_report_data(report, view);
  // Inside <script type="application/json">, only "</script" or "<!--" could
  // end or change the element: JSON allows "<" to be written \u003c, and
  // outside strings JSON has no "<" at all.
  std::string escaped;
  escaped.reserve(data.size() + data.size() / 64);
  for (char c : data) {
    if (c == '<')
      escaped += "\\u003c";
    else
      escaped += c;
  }
  out << kHtmlPageBefore << escaped << kHtmlPageAfter;
}

}  // namespace memtrack
