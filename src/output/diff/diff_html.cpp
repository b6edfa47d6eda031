// `memtrack diff --format html`: one self-contained page (html/diff.*) with
// the budgets, the totals of both runs side by side, the changed call paths
// with their stacks, and a differential flame graph. The page embeds the
// JSON document of `diff --format json` as is, so every figure it shows is
// that document's; the call trees of both runs are aggregated here.
#include <absl/container/flat_hash_map.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <tuple>

#include "output/diff/diff_output.h"
#include "output/html_page.h"

namespace memtrack {
namespace {

using nlohmann::json;

// Changed call paths the page lists (the JSON's "top"), whatever --top says.
constexpr size_t kHtmlDiffSites = 500;
// Tree nodes below this share of the root, in every cost of both runs, are
// merged into one "[other]" node per parent (as the report's page does).
constexpr double kHtmlDiffPrunePercent = 0.1;

constexpr std::array<CostKind, 6> kCosts = {CostKind::Bytes, CostKind::Count,     CostKind::Peak,
                                            CostKind::Leaked, CostKind::LiveAtEnd, CostKind::Temporary};
// Both runs' costs: the base's six, then the head's.
using RunCosts = std::array<uint64_t, 2 * kCosts.size()>;

RunCosts run_costs(const SiteDiff& site) {
  RunCosts costs{};
  for (size_t i = 0; i < kCosts.size(); ++i) {
    costs[i] = cost_of(site.base, kCosts[i]);
    costs[kCosts.size() + i] = cost_of(site.head, kCosts[i]);
  }
  return costs;
}

// What a tree node is called: the function, else the module it is in; a
// key frame says no more than that (recording_diff.h, "SiteKeyFrame").
std::string node_label(const SiteKeyFrame& frame) {
  if (!frame.function.empty()) return frame.function;
  return frame.module.empty() ? "[unknown]" : "[" + frame.module + "]";
}

// Frames shown by the page: [label, file, module], each once.
class KeyFrames {
 public:
  uint32_t add(const std::string& label, const std::string& file, const std::string& module) {
    auto [it, added] = index_.try_emplace(std::make_tuple(label, file, module), static_cast<uint32_t>(rows_.size()));
    if (added) rows_.push_back(json::array({label, file, module}));
    return it->second;
  }
  json take() { return std::move(rows_); }

 private:
  std::map<std::tuple<std::string, std::string, std::string>, uint32_t> index_;
  json rows_ = json::array();
};

// The keys of both runs as one call tree, merged by label as the report's
// trees are; each node carries both runs' costs. A node shows the first key
// frame seen with its label.
class DiffTree {
 public:
  explicit DiffTree(uint32_t root_frame) { nodes_.push_back({root_frame, {}, {}, {}}); }

  // `path` innermost first: (label, frame) per step.
  void add(const std::vector<std::pair<std::string, uint32_t>>& path, bool top_down, const RunCosts& costs) {
    size_t node = 0;
    add_costs(node, costs);
    for (size_t i = 0; i < path.size(); ++i) {
      const auto& [label, frame] = top_down ? path[path.size() - 1 - i] : path[i];
      auto [it, added] = nodes_[node].child_by_label.try_emplace(label, nodes_.size());
      const size_t child = it->second;  // `it` dies when nodes_ grows
      if (added) {
        nodes_[node].children.push_back(child);
        nodes_.push_back({frame, {}, {}, {}});
      }
      node = child;
      add_costs(node, costs);
    }
  }

  // [frame, [base costs], [head costs], [children]], the children with the
  // largest head cost `by` first, those below the threshold merged.
  json to_json(size_t by, uint32_t other_frame, uint64_t* pruned) const { return node_json(0, by, other_frame, pruned); }

 private:
  struct Node {
    uint32_t frame;
    RunCosts costs;
    std::vector<size_t> children;
    absl::flat_hash_map<std::string, size_t> child_by_label;
  };

  void add_costs(size_t node, const RunCosts& costs) {
    for (size_t i = 0; i < costs.size(); ++i) nodes_[node].costs[i] += costs[i];
  }

  bool above_threshold(const RunCosts& costs) const {
    const RunCosts& root = nodes_[0].costs;
    for (size_t i = 0; i < costs.size(); ++i)
      if (costs[i] > 0 && static_cast<double>(costs[i]) * 100.0 >= static_cast<double>(root[i]) * kHtmlDiffPrunePercent)
        return true;
    return false;
  }

  static json costs_json(const RunCosts& costs, size_t run) {
    return json(std::vector<uint64_t>(costs.begin() + static_cast<ptrdiff_t>(run * kCosts.size()),
                                      costs.begin() + static_cast<ptrdiff_t>((run + 1) * kCosts.size())));
  }

  json node_json(size_t index, size_t by, uint32_t other_frame, uint64_t* pruned) const {
    const Node& node = nodes_[index];
    std::vector<size_t> kept;
    RunCosts other{};
    bool has_other = false;
    for (size_t child : node.children) {
      if (above_threshold(nodes_[child].costs)) {
        kept.push_back(child);
        continue;
      }
      for (size_t i = 0; i < other.size(); ++i) other[i] += nodes_[child].costs[i];
      has_other = true;
      ++*pruned;
    }
    const size_t head_by = kCosts.size() + by;
    std::stable_sort(kept.begin(), kept.end(), [&](size_t a, size_t b) {
      const RunCosts &ca = nodes_[a].costs, &cb = nodes_[b].costs;
      return std::tie(ca[head_by], ca[by]) > std::tie(cb[head_by], cb[by]);
    });
    json children = json::array();
    for (size_t child : kept) children.push_back(node_json(child, by, other_frame, pruned));
    if (has_other) children.push_back(json::array({other_frame, costs_json(other, 0), costs_json(other, 1), json::array()}));
    return json::array({node.frame, costs_json(node.costs, 0), costs_json(node.costs, 1), std::move(children)});
  }

  std::vector<Node> nodes_;
};

json trees_json(const RecordingDiff& diff, size_t by, KeyFrames& frames, json* pruned) {
  const uint32_t root_frame = frames.add("all", "", ""), other_frame = frames.add("[other]", "", "");
  std::vector<std::pair<RunCosts, std::vector<std::pair<std::string, uint32_t>>>> paths;
  for (const SiteDiff& site : diff.sites) {
    RunCosts costs = run_costs(site);
    if (std::all_of(costs.begin(), costs.end(), [](uint64_t c) { return c == 0; })) continue;
    std::vector<std::pair<std::string, uint32_t>> path;
    for (const SiteKeyFrame& k : site.key) {
      std::string label = node_label(k);
      path.emplace_back(label, frames.add(label, k.file, k.module));
    }
    if (path.empty()) path.emplace_back("[no stack]", frames.add("[no stack]", "", ""));
    paths.emplace_back(costs, std::move(path));
  }
  json trees = json::object();
  for (bool top_down : {true, false}) {
    DiffTree tree(root_frame);
    for (const auto& [costs, path] : paths) tree.add(path, top_down, costs);
    const char* direction = top_down ? "top-down" : "bottom-up";
    uint64_t merged = 0;
    trees[direction] = tree.to_json(by, other_frame, &merged);
    (*pruned)[direction] = merged;
  }
  return trees;
}

}  // namespace

std::string diff_html_data(const DiffView& view) {
  const size_t by = static_cast<size_t>(std::find(kCosts.begin(), kCosts.end(), view.by) - kCosts.begin());
  KeyFrames frames;
  json pruned = json::object();
  json trees = nullptr;
  if (!view.single() && view.diff->sites_compared) trees = trees_json(*view.diff, by, frames, &pruned);
  json costs = json::array();
  for (CostKind cost : kCosts) costs.push_back(cost_kind_name(cost));
  json figures = json::array();
  for (const FigureInfo& info : all_figures()) figures.push_back({info.name, info.title, info.bytes});
  json data = {
      {"figures", std::move(figures)},
      {"costs", std::move(costs)},
      {"by", cost_kind_name(view.by)},
      {"sites_limit", kHtmlDiffSites},
      {"prune_percent", kHtmlDiffPrunePercent},
      {"pruned_nodes", std::move(pruned)},
      {"trees", std::move(trees)},
      {"frames", frames.take()},
  };
  // The JSON output's document as is: the page's figures are its figures.
  std::string document = compact_diff_json(view, kHtmlDiffSites);
  std::string own = data.dump(-1, ' ', false, json::error_handler_t::replace);
  return "{\"diff\":" + document + "," + own.substr(1);
}

void write_diff_html(const DiffView& view, std::ostream& out) {
  write_html_page(kHtmlDiffPageBefore, diff_html_data(view), kHtmlDiffPageAfter, out);
}

}  // namespace memtrack
