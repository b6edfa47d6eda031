// Call trees merged from the sites of a Profile, weighted by one cost:
// top-down (from the process entry towards the allocations) or bottom-up
// (from the allocating functions towards their callers). Each source frame
// (inline levels included) is a node; siblings with the same label merge.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyze/cost_kind.h"
#include "analyze/profile.h"

namespace memtrack {

struct CallTreeNode {
  std::string label;  // function, or "[module+0xoffset]" / "[0xaddress]" when unknown
  uint64_t cost = 0;  // of every site through this node
  std::vector<CallTreeNode> children;  // by cost, largest first (ties by label)
};

enum class TreeDirection { TopDown, BottomUp };

// The root (label "all") holds the total of the chosen cost over every site.
CallTreeNode build_call_tree(const Profile& profile, CostKind cost, TreeDirection direction);

// A location's frames as labels, innermost first (one per inline level;
// one "[...]" label when nothing is known). Shared by every output that
// names frames.
std::vector<std::string> frame_labels(const Profile& profile, const ProfileLocation& location);

// Indexes of the sites with a non-zero cost, costliest first (ties: the
// order of the sites), at most `top` (0: all).
std::vector<size_t> ranked_sites(const Profile& profile, CostKind cost, size_t top);

}  // namespace memtrack
