#include "analyze/call_tree.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace memtrack {
namespace {

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

CallTreeNode& child(CallTreeNode& parent, const std::string& label) {
  for (CallTreeNode& node : parent.children)
    if (node.label == label) return node;
  parent.children.push_back(CallTreeNode{label, 0, {}});
  return parent.children.back();
}

void sort_tree(CallTreeNode& node) {
  std::sort(node.children.begin(), node.children.end(), [](const CallTreeNode& a, const CallTreeNode& b) {
    return a.cost != b.cost ? a.cost > b.cost : a.label < b.label;
  });
  for (CallTreeNode& c : node.children) sort_tree(c);
}

}  // namespace

std::vector<std::string> frame_labels(const Profile& profile, const ProfileLocation& location) {
  std::vector<std::string> labels;
  for (const SourceFrame& frame : location.frames)
    labels.push_back(frame.function.empty() ? "[unknown]" : frame.function);
  if (!labels.empty()) return labels;
  if (location.module >= 0)
    labels.push_back(fmt::format("[{}+{:#x}]", basename_of(profile.modules[static_cast<size_t>(location.module)].path),
                                 location.file_offset));
  else
    labels.push_back(fmt::format("[{:#x}]", location.address));
  return labels;
}

CallTreeNode build_call_tree(const Profile& profile, CostKind cost, TreeDirection direction) {
  CallTreeNode root{"all", 0, {}};
  for (const ProfileSite& site : profile.sites) {
    uint64_t value = cost_of(site.costs, cost);
    if (value == 0) continue;
    // Innermost first, inline levels expanded.
    std::vector<std::string> path;
    for (uint32_t index : site.locations)
      for (std::string& label : frame_labels(profile, profile.locations[index])) path.push_back(std::move(label));
    if (path.empty()) path.push_back(site.outcome == StackOutcome::Undefined ? "[stack record missing]" : "[no stack]");
    if (direction == TreeDirection::TopDown) std::reverse(path.begin(), path.end());
    root.cost += value;
    CallTreeNode* node = &root;
    for (const std::string& label : path) {
      node = &child(*node, label);
      node->cost += value;
    }
  }
  sort_tree(root);
  return root;
}

std::vector<size_t> ranked_sites(const Profile& profile, CostKind cost, size_t top) {
  std::vector<size_t> order;
  for (size_t i = 0; i < profile.sites.size(); ++i)
    if (cost_of(profile.sites[i].costs, cost) > 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return cost_of(profile.sites[a].costs, cost) > cost_of(profile.sites[b].costs, cost);
  });
  if (top != 0 && order.size() > top) order.resize(top);
  return order;
}

}  // namespace memtrack
