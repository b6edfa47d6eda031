// Which cost of a site an output ranks or weighs by (folded stacks, CLI
// options). Names are the ones the command line accepts.
#pragma once

#include <cstdint>
#include <string_view>

#include "analyze/profile.h"

namespace memtrack {

enum class CostKind { Bytes, Count, Peak, Leaked, LiveAtEnd, Temporary };

inline uint64_t cost_of(const SiteCosts& costs, CostKind kind) {
  switch (kind) {
    case CostKind::Bytes: return costs.allocated_bytes;
    case CostKind::Count: return costs.allocations;
    case CostKind::Peak: return costs.peak_bytes;
    case CostKind::Leaked: return costs.leaked_bytes;
    case CostKind::LiveAtEnd: return costs.live_at_end_bytes;
    case CostKind::Temporary: return costs.temporary_allocations;
  }
  return 0;  // not reached: every kind is handled above
}

// "bytes", "count", "peak", "leaked", "live_at_end", "temporary".
inline const char* cost_kind_name(CostKind kind) {
  switch (kind) {
    case CostKind::Bytes: return "bytes";
    case CostKind::Count: return "count";
    case CostKind::Peak: return "peak";
    case CostKind::Leaked: return "leaked";
    case CostKind::LiveAtEnd: return "live_at_end";
    case CostKind::Temporary: return "temporary";
  }
  return "?";  // not reached
}

// Parses a name cost_kind_name gives (exact, lowercase). False, and *kind
// untouched, for anything else.
inline bool cost_kind_from_name(std::string_view name, CostKind* kind) {
  for (CostKind k : {CostKind::Bytes, CostKind::Count, CostKind::Peak, CostKind::Leaked, CostKind::LiveAtEnd,
                     CostKind::Temporary}) {
    if (name == cost_kind_name(k)) {
      *kind = k;
      return true;
    }
  }
  return false;
}

}  // namespace memtrack
