// JSON values the report's and the diff's documents write alike.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "analyze/profile.h"

namespace memtrack::json_values {

template <typename T>
nlohmann::json or_null(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

// A site's costs object (docs/REPORT.md, "JSON schema": "costs").
inline nlohmann::json site_costs(const SiteCosts& c) {
  return {{"allocations", c.allocations},
          {"allocated_bytes", c.allocated_bytes},
          {"peak_bytes", c.peak_bytes},
          {"peak_allocations", c.peak_allocations},
          {"leaked_bytes", c.leaked_bytes},
          {"leaked_allocations", c.leaked_allocations},
          {"live_at_end_bytes", c.live_at_end_bytes},
          {"live_at_end_allocations", c.live_at_end_allocations},
          {"temporary_allocations", c.temporary_allocations},
          {"temporary_bytes", c.temporary_bytes}};
}

}  // namespace memtrack::json_values
