// What the text and JSON reports show of a Profile: sites ranked by one
// cost, at most `top` of them, and optionally a merged call tree.
#pragma once

#include <cstddef>
#include <optional>

#include "analyze/call_tree.h"
#include "analyze/cost_kind.h"
#include "analyze/profile.h"

namespace memtrack {

struct ProfileView {
  const Profile* profile = nullptr;
  CostKind by = CostKind::Bytes;
  size_t top = 20;  // 0: every site
  std::optional<TreeDirection> tree;
  // Tree nodes below this share of the root's cost are left out of the text.
  double tree_threshold_percent = 1.0;
};

}  // namespace memtrack
