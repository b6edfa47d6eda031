// What the text and JSON reports show of a Profile: sites ranked by one
// cost, at most `top` of them, and optionally a merged call tree.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "analyze/call_tree.h"
#include "analyze/cost_kind.h"
#include "analyze/profile.h"
#include "output/output.h"

namespace memtrack {

struct ProfileView {
  const Profile* profile = nullptr;
  CostKind by = CostKind::Bytes;
  size_t top = 10;  // sites and allocating functions; 0: all
  std::optional<TreeDirection> tree;
  // Tree nodes below this share of the root's cost are left out of the text.
  double tree_threshold_percent = 1.0;
  // When the filters selected no allocation: what they matched and what the
  // recording has ("no allocation of pid 999; the recording has pids 12, 13").
  std::string filter_note{};
};

inline ProfileView view_of(const ReportModel& model, const OutputOptions& options) {
  return {&model.profile, options.by, options.top, options.tree, 1.0, options.filter_note};
}

}  // namespace memtrack
