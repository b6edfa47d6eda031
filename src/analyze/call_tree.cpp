#include "analyze/call_tree.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <stdexcept>

#include "util/file_name.h"

namespace memtrack {
namespace {

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

std::string address_label(const Profile& profile, const ProfileLocation& location) {
  if (location.python) return fmt::format("[python code {:#x}]", location.address);
  if (location.module >= 0 && static_cast<size_t>(location.module) < profile.modules.size())
    return fmt::format("[{}+{:#x}]", file_name_of(profile.modules[static_cast<size_t>(location.module)].path),
                       location.file_offset);
  return fmt::format("[{:#x}]", location.address);
}

// "void ns::f<int>(int)" -> "ns::f<int>": without the parameters and the
// return type (template functions' demangled names have one).
std::string_view qualified_name(std::string_view function) {
  int angles = 0;
  size_t start = 0, end = function.size();
  for (size_t i = 0; i < function.size(); ++i) {
    char c = function[i];
    if (function.substr(i).starts_with("(anonymous namespace)")) {
      i += std::string_view("(anonymous namespace)").size() - 1;
    } else if (c == '<') {
      ++angles;
    } else if (c == '>') {
      angles = std::max(angles - 1, 0);
    } else if (c == '(' && angles == 0 && i > start) {
      end = i;
      break;
    } else if (c == ' ' && angles == 0 && !function.substr(start, i - start).ends_with("operator")) {
      start = i + 1;
    }
  }
  return function.substr(start, end - start);
}

// "ns::Pool<T>::allocate<int>" -> "allocate".
std::string_view unqualified_name(std::string_view qualified) {
  int angles = 0;
  size_t start = 0, end = qualified.size();
  for (size_t i = 0; i < qualified.size(); ++i) {
    char c = qualified[i];
    if (c == '<') {
      if (angles++ == 0) end = i;
    } else if (c == '>') {
      angles = std::max(angles - 1, 0);
    } else if (c == ':' && angles == 0 && i + 1 < qualified.size() && qualified[i + 1] == ':') {
      start = i + 2;
      end = qualified.size();
      ++i;
    }
  }
  return qualified.substr(start, std::max(end, start) - start);
}

}  // namespace

bool site_is_truncated(const ProfileSite& site) {
  return !site.locations.empty() && site.outcome != StackOutcome::Complete;
}

std::vector<SiteFrame> site_frames(const Profile& profile, const ProfileSite& site) {
  std::vector<SiteFrame> frames;
  for (uint32_t index : site.locations) {
    const ProfileLocation& location = profile.locations[index];
    if (location.frames.empty()) frames.push_back({&location, nullptr});
    for (const SourceFrame& frame : location.frames) frames.push_back({&location, &frame});
  }
  return frames;
}

std::string frame_label(const Profile& profile, const SiteFrame& frame, FrameNaming naming) {
  if (!frame.frame || frame.frame->function.empty()) return address_label(profile, *frame.location);
  const SourceFrame& f = *frame.frame;
  if (frame.location->python) {
    // Python functions repeat names across files (<module>, __init__): the
    // file is part of the name.
    if (naming == FrameNaming::CallSite && f.line != 0)
      return fmt::format("{} ({}:{})", f.function, file_name_of(f.file), f.line);
    return fmt::format("{} ({})", f.function, file_name_of(f.file));
  }
  if (naming == FrameNaming::CallSite && f.file.empty() && f.symbol_offset) {
    // Shown at the return address, as the [module+0x...] labels are.
    uint64_t offset = *f.symbol_offset + (frame.location->exact ? 0 : 1);
    return fmt::format("{}+{:#x}", f.function, offset);
  }
  return f.function;
}

std::vector<std::string> frame_labels(const Profile& profile, const ProfileLocation& location, FrameNaming naming) {
  std::vector<std::string> labels;
  for (const SourceFrame& frame : location.frames) labels.push_back(frame_label(profile, {&location, &frame}, naming));
  if (labels.empty()) labels.push_back(address_label(profile, location));
  return labels;
}

std::string_view stackless_label(const ProfileSite& site) {
  return site.outcome == StackOutcome::Undefined ? "[stack record missing]" : "[no stack]";
}

std::vector<std::string> site_labels(const Profile& profile, const ProfileSite& site, FrameNaming naming) {
  if (site.locations.empty()) return {std::string(stackless_label(site))};
  std::vector<std::string> labels;
  for (uint32_t index : site.locations) {
    if (index >= profile.locations.size())
      throw std::runtime_error(fmt::format("a site refers to location {} of {}", index, profile.locations.size()));
    const ProfileLocation& location = profile.locations[index];
    if (location.module >= static_cast<int64_t>(profile.modules.size()))
      throw std::runtime_error(
          fmt::format("a location refers to module {} of {}", location.module, profile.modules.size()));
    for (std::string& label : frame_labels(profile, location, naming)) labels.push_back(std::move(label));
  }
  if (site_is_truncated(site)) labels.push_back(kTruncatedLabel);
  return labels;
}

bool is_allocation_wrapper(std::string_view function) {
  if (function.starts_with("operator new")) return true;
  std::string_view qualified = qualified_name(function);
  for (std::string_view library : {"std::", "__gnu_cxx::", "__cxxabiv1::"})
    if (qualified.starts_with(library)) return true;
  std::string name(unqualified_name(qualified));
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  for (std::string_view word : {"alloc", "strdup", "strndup", "memdup"})
    if (name.find(word) != std::string::npos) return true;
  return false;
}

size_t allocating_frame_index(const std::vector<SiteFrame>& frames) {
  for (size_t i = 0; i < frames.size(); ++i)
    if (frames[i].location->python) return i;
  size_t after_outermost_wrapper = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    const SourceFrame* frame = frames[i].frame;
    bool unnamed = !frame || frame->function.empty();
    if (unnamed) continue;
    if (!is_allocation_wrapper(frame->function)) break;
    after_outermost_wrapper = i + 1;
  }
  // Every frame a wrapper: the outermost one is where the program allocated.
  return std::min(after_outermost_wrapper, frames.empty() ? 0 : frames.size() - 1);
}

std::string allocating_function(const Profile& profile, const ProfileSite& site) {
  std::vector<SiteFrame> frames = site_frames(profile, site);
  if (frames.empty()) return std::string(stackless_label(site));
  return frame_label(profile, frames[allocating_frame_index(frames)], FrameNaming::Function);
}

std::vector<FunctionGroup> group_by_allocating_function(const Profile& profile, CostKind cost, size_t top) {
  std::vector<FunctionGroup> groups;
  std::map<std::string, size_t> index_of;
  for (size_t site : ranked_sites(profile, cost, 0)) {
    std::string function = allocating_function(profile, profile.sites[site]);
    auto [it, added] = index_of.try_emplace(function, groups.size());
    if (added) groups.push_back({function, {}, {}});
    FunctionGroup& group = groups[it->second];
    group.costs.add(profile.sites[site].costs);
    group.sites.push_back(site);  // ranked_sites: costliest first
  }
  std::sort(groups.begin(), groups.end(), [&](const FunctionGroup& a, const FunctionGroup& b) {
    uint64_t ca = cost_of(a.costs, cost), cb = cost_of(b.costs, cost);
    return ca != cb ? ca > cb : a.function < b.function;
  });
  if (top != 0 && groups.size() > top) groups.resize(top);
  return groups;
}

CallTreeNode build_call_tree(const Profile& profile, CostKind cost, TreeDirection direction) {
  CallTreeNode root{"all", 0, {}};
  for (const ProfileSite& site : profile.sites) {
    uint64_t value = cost_of(site.costs, cost);
    if (value == 0) continue;
    std::vector<std::string> path = site_labels(profile, site, FrameNaming::Function);
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
