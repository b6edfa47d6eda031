#include "output/html_output.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include <absl/container/flat_hash_map.h>

#include <nlohmann/json.hpp>

#include "analyze/call_tree.h"
#include "output/html_page.h"
#include "output/json_output.h"
#include "util/file_name.h"

namespace memtrack {
namespace {

using nlohmann::json;

constexpr std::array<CostKind, 6> kCosts = {CostKind::Bytes, CostKind::Count,     CostKind::Peak,
                                            CostKind::Leaked, CostKind::LiveAtEnd, CostKind::Temporary};
using Costs = std::array<uint64_t, kCosts.size()>;

Costs costs_of(const SiteCosts& site) {
  Costs costs{};
  for (size_t i = 0; i < kCosts.size(); ++i) costs[i] = cost_of(site, kCosts[i]);
  return costs;
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
    std::string module(location.module >= 0 ? file_name_of(profile.modules[static_cast<size_t>(location.module)].path)
                                            : "");
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

json costs_json(const Costs& costs) { return json(std::vector<uint64_t>(costs.begin(), costs.end())); }
bool above_threshold(const Costs& costs, const Costs& root);

// A call path as the trees see it, innermost first: per frame, its label
// (interned; siblings with the same label merge, as in build_call_tree) and
// the frame the page shows for it.
struct PathStep {
  uint32_t label;
  uint32_t frame;
};

// Labels interned, and each source frame's step made once (call paths
// share their locations).
class PathSteps {
 public:
  uint32_t intern(const std::string& label) {
    return ids_.try_emplace(label, static_cast<uint32_t>(ids_.size())).first->second;
  }
  PathStep step(const Profile& profile, const SiteFrame& frame, FrameTable& frames) {
    uint64_t location = static_cast<uint64_t>(frame.location - profile.locations.data());
    uint64_t level = frame.frame ? static_cast<uint64_t>(frame.frame - frame.location->frames.data()) + 1 : 0;
    auto [it, added] = steps_.try_emplace((location << 16) | level);
    if (added) it->second = {intern(frame_label(profile, frame, FrameNaming::Function)), frames.add(profile, frame)};
    return it->second;
  }

 private:
  absl::flat_hash_map<std::string, uint32_t> ids_;
  absl::flat_hash_map<uint64_t, PathStep> steps_;  // (location << 16 | inline level + 1)
};

std::vector<PathStep> site_path(const Profile& profile, const ProfileSite& site, FrameTable& frames, PathSteps& labels) {
  std::vector<PathStep> path;
  for (const SiteFrame& frame : site_frames(profile, site)) path.push_back(labels.step(profile, frame, frames));
  if (path.empty()) {
    std::string label = site.outcome == StackOutcome::Undefined ? "[stack record missing]" : "[no stack]";
    path.push_back({labels.intern(label), frames.add_marker(label)});
  }
  if (site_is_truncated(site)) path.push_back({labels.intern(kTruncatedLabel), frames.add_marker(kTruncatedLabel)});
  return path;
}

// A call tree carrying every cost, its nodes in one vector (node 0 the
// root) linked first-child/next-sibling: a million nodes for 20,000 deep
// call paths, so each node is kept small. A node shows the first frame seen
// with its label.
class CostTree {
 public:
  explicit CostTree(uint32_t root_frame) { nodes_.push_back({root_frame, kNone, kNone, {}}); }

  void add(const std::vector<PathStep>& path, bool top_down, const Costs& costs) {
    uint32_t node = 0;
    add_costs(node, costs);
    for (size_t i = 0; i < path.size(); ++i) {
      const PathStep& step = top_down ? path[path.size() - 1 - i] : path[i];
      auto [it, added] = child_index_.try_emplace((uint64_t{node} << 32) | step.label, nodes_.size());
      if (added) {
        nodes_.push_back({step.frame, kNone, nodes_[node].first_child, {}});
        nodes_[node].first_child = it->second;
      }
      node = it->second;
      add_costs(node, costs);
    }
  }

  // [frame, [costs], [children]], children costliest first in cost `by`;
  // those below the threshold in every cost become one "[other]" node.
  // Nodes are numbered in the order they are written (depth first, a node
  // before its children), as the page numbers them.
  json pruned_json(size_t by, uint32_t other_frame, uint64_t* pruned) {
    written_id_.assign(nodes_.size(), kNone);
    other_id_.assign(nodes_.size(), kNone);
    next_id_ = 0;
    return node_json(0, by, other_frame, pruned);
  }

  // The written node where `path` ends: its last node, or the "[other]" node
  // its pruned part went into. After pruned_json.
  uint32_t written_end(const std::vector<PathStep>& path, bool top_down) const {
    uint32_t node = 0;
    for (size_t i = 0; i < path.size(); ++i) {
      const PathStep& step = top_down ? path[path.size() - 1 - i] : path[i];
      uint32_t child = child_index_.at((uint64_t{node} << 32) | step.label);
      if (written_id_[child] == kNone) return other_id_[node];
      node = child;
    }
    return written_id_[node];
  }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  struct Node {
    uint32_t frame;
    uint32_t first_child;
    uint32_t next_sibling;
    Costs costs;
  };

  void add_costs(uint32_t node, const Costs& costs) {
    for (size_t i = 0; i < costs.size(); ++i) nodes_[node].costs[i] += costs[i];
  }

  json node_json(uint32_t index, size_t by, uint32_t other_frame, uint64_t* pruned) {
    written_id_[index] = next_id_++;
    const Node& node = nodes_[index];
    std::vector<uint32_t> kept;
    Costs other{};
    bool has_other = false;
    for (uint32_t child = node.first_child; child != kNone; child = nodes_[child].next_sibling) {
      if (above_threshold(nodes_[child].costs, nodes_[0].costs)) {
        kept.push_back(child);
      } else {
        for (size_t i = 0; i < other.size(); ++i) other[i] += nodes_[child].costs[i];
        has_other = true;
        ++*pruned;
      }
    }
    // Ties in the order the children were first seen (the list holds them newest first).
    std::reverse(kept.begin(), kept.end());
    std::stable_sort(kept.begin(), kept.end(),
                     [&](uint32_t a, uint32_t b) { return nodes_[a].costs[by] > nodes_[b].costs[by]; });
    json children = json::array();
    for (uint32_t child : kept) children.push_back(node_json(child, by, other_frame, pruned));
    if (has_other) {
      other_id_[index] = next_id_++;
      children.push_back(json::array({other_frame, costs_json(other), json::array()}));
    }
    return json::array({node.frame, costs_json(node.costs), std::move(children)});
  }

  std::vector<Node> nodes_;
  absl::flat_hash_map<uint64_t, uint32_t> child_index_;  // (parent << 32 | label) -> child
  std::vector<uint32_t> written_id_;  // per node: its number in the written tree, kNone when pruned
  std::vector<uint32_t> other_id_;    // per node: the number of its "[other]" child, if any
  uint32_t next_id_ = 0;
};

bool above_threshold(const Costs& costs, const Costs& root) {
  for (size_t i = 0; i < costs.size(); ++i)
    if (costs[i] > 0 && static_cast<double>(costs[i]) * 100.0 >= static_cast<double>(root[i]) * kHtmlPrunePercent)
      return true;
  return false;
}

// The call paths the page lists: the costliest of each cost.
std::vector<size_t> listed_sites(const Profile& profile) {
  std::set<size_t> chosen;
  for (CostKind cost : kCosts)
    for (size_t index : ranked_sites(profile, cost, kHtmlSitesPerCost)) chosen.insert(index);
  return {chosen.begin(), chosen.end()};
}

// The listed call paths with their frames (innermost first).
json sites_json(const Profile& profile, const std::vector<size_t>& listed, FrameTable& frames) {
  json sites = json::array();
  for (size_t index : listed) {
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

// Allocations per slice of time (count, bytes; dense, one per slice) of a
// group of call paths: a node of a tree where call paths end, or a listed
// call path.
using SliceTallies = std::vector<std::pair<uint64_t, uint64_t>>;

// What lets the page filter its call paths by a window of time (brushing the
// chart): the allocations over time of the call paths ending at each written
// node of each tree (a node's own cost: the page sums them up to the root)
// and of each listed call path, in slices of time coarsened until the page
// holds at most kHtmlWindowEntries of them. Only allocations and their bytes
// are made in a window; the other costs depend on what happened after.
class WindowData {
 public:
  WindowData(const Timeline& timeline, size_t listed) : timeline_(timeline), listed_(listed) {
    for (const std::vector<SiteSlice>& series : timeline.sites.by_site)
      if (!series.empty()) slices_ = std::max<size_t>(slices_, series.back().slice + 1);
  }

  void add(const ProfileSite& site, uint32_t top_down_end, uint32_t bottom_up_end, std::optional<size_t> listed_at) {
    for (uint32_t id : site.replay_sites) {
      if (id >= timeline_.sites.by_site.size()) continue;
      for (const SiteSlice& s : timeline_.sites.by_site[id]) {
        auto add_to = [&](SliceTallies& tallies) {
          if (tallies.empty()) tallies.resize(slices_);
          auto& [count, bytes] = tallies[s.slice];
          count += s.allocations;
          bytes += s.bytes;
        };
        add_to(top_down_[top_down_end]);
        add_to(bottom_up_[bottom_up_end]);
        if (listed_at) add_to(listed_[*listed_at]);
      }
    }
  }

  json take() {
    uint64_t slice_ns = timeline_.sites.slice_ns;
    while (entries() > kHtmlWindowEntries) {
      for (auto* groups : {&top_down_, &bottom_up_})
        for (auto& [node, tallies] : *groups) tallies = coarsened(tallies);
      for (SliceTallies& tallies : listed_) tallies = coarsened(tallies);
      slice_ns *= 2;
    }
    auto groups_json = [](const std::map<uint32_t, SliceTallies>& groups) {
      json out = json::array();
      for (const auto& [node, tallies] : groups) out.push_back(json::array({node, flat(tallies)}));
      return out;
    };
    json listed = json::array();
    for (const SliceTallies& tallies : listed_) listed.push_back(flat(tallies));
    return {{"from_ns", timeline_.from_ns},
            {"to_ns", timeline_.to_ns ? json(*timeline_.to_ns) : json(nullptr)},
            {"slice_ns", slice_ns},
            {"top-down", groups_json(top_down_)},
            {"bottom-up", groups_json(bottom_up_)},
            {"sites", std::move(listed)}};
  }

 private:
  size_t entries() const {
    size_t n = 0;
    auto used = [](const SliceTallies& tallies) {
      return static_cast<size_t>(
          std::count_if(tallies.begin(), tallies.end(), [](const auto& tally) { return tally.first || tally.second; }));
    };
    for (const auto* groups : {&top_down_, &bottom_up_})
      for (const auto& [node, tallies] : *groups) n += used(tallies);
    for (const SliceTallies& tallies : listed_) n += used(tallies);
    return n;
  }
  static SliceTallies coarsened(const SliceTallies& tallies) {
    SliceTallies out((tallies.size() + 1) / 2);
    for (size_t slice = 0; slice < tallies.size(); ++slice) {
      out[slice / 2].first += tallies[slice].first;
      out[slice / 2].second += tallies[slice].second;
    }
    return out;
  }
  // [slice, allocations, bytes, slice, ...] of the slices that have any
  static json flat(const SliceTallies& tallies) {
    std::vector<uint64_t> out;
    for (size_t slice = 0; slice < tallies.size(); ++slice)
      if (tallies[slice].first || tallies[slice].second)
        out.insert(out.end(), {slice, tallies[slice].first, tallies[slice].second});
    return json(std::move(out));
  }

  const Timeline& timeline_;
  std::map<uint32_t, SliceTallies> top_down_, bottom_up_;
  std::vector<SliceTallies> listed_;
  size_t slices_ = 0;
};

bool has_stacks(const Profile& profile) {
  for (int i = 0; i < kStackOutcomeCount; ++i)
    if (profile.definitions_by_outcome[i] > 0) return true;
  for (const ProfileSite& site : profile.sites)
    if (!site.locations.empty()) return true;
  return false;
}

}  // namespace

extern const OutputFormat kHtmlOutput{
    .name = "html",
    .summary = "one self-contained page: flame graph, call trees, tables (open in a browser)",
    .noun = "HTML report",
    .site_timelines = true,
    .write = [](const ReportModel& model, const OutputOptions& options, std::ostream& sink) {
      write_html_report(model.report, view_of(model, options), sink);
    }};

std::string html_report_data(const Report& report, const ProfileView& view) {
  const Profile& profile = *view.profile;
  size_t by = static_cast<size_t>(std::find(kCosts.begin(), kCosts.end(), view.by) - kCosts.begin());
  FrameTable frames;
  PathSteps labels;
  uint32_t root_frame = frames.add_marker("all");
  struct Path {
    size_t site;
    Costs costs;
    std::vector<PathStep> steps;
    uint32_t written_end[2] = {0, 0};  // top-down, bottom-up
  };
  std::vector<Path> paths;
  for (size_t index = 0; index < profile.sites.size(); ++index) {
    const ProfileSite& site = profile.sites[index];
    Costs costs = costs_of(site.costs);
    if (std::any_of(costs.begin(), costs.end(), [](uint64_t c) { return c > 0; }))
      paths.push_back({index, costs, site_path(profile, site, frames, labels)});
  }
  json pruned = json::object();
  uint32_t other_frame = frames.add_marker("[other]");
  json trees = json::object();
  // One tree at a time: only the pruned one outlives its loop.
  for (bool top_down : {true, false}) {
    CostTree tree(root_frame);
    for (const Path& path : paths) tree.add(path.steps, top_down, path.costs);
    const char* direction = top_down ? "top-down" : "bottom-up";
    uint64_t merged = 0;
    trees[direction] = tree.pruned_json(by, other_frame, &merged);
    pruned[direction] = merged;
    for (Path& path : paths) path.written_end[top_down ? 0 : 1] = tree.written_end(path.steps, top_down);
  }
  std::vector<size_t> listed = listed_sites(profile);
  json sites = sites_json(profile, listed, frames);
  json window = nullptr;
  if (view.timeline && !view.timeline->sites.by_site.empty()) {
    WindowData window_data(*view.timeline, listed.size());
    for (const Path& path : paths) {
      auto at = std::lower_bound(listed.begin(), listed.end(), path.site);
      std::optional<size_t> listed_at;
      if (at != listed.end() && *at == path.site) listed_at = static_cast<size_t>(at - listed.begin());
      window_data.add(profile.sites[path.site], path.written_end[0], path.written_end[1], listed_at);
    }
    window = window_data.take();
  }
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
      {"window", std::move(window)},
      {"frames", frames.take()},
  };
  // The JSON report's document as is (its own figures, tables and counters).
  std::string document = compact_json_report(report, &view);
  std::string own = data.dump(-1, ' ', false, json::error_handler_t::replace);
  return "{\"report\":" + document + "," + own.substr(1);
}

void write_html_report(const Report& report, const ProfileView& view, std::ostream& out) {
  write_html_page(kHtmlPageBefore, html_report_data(report, view), kHtmlPageAfter, out);
}

}  // namespace memtrack
