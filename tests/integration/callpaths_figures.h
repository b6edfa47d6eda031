// What fx_callpaths' `figures` scenario allocates (tests/fixtures/
// fx_callpaths.c): its ground truth, per site and in all, for the tests that
// check a report or an export against it.
#pragma once

#include <cstdint>

namespace memtrack::testing {

struct Figures {
  uint64_t allocations, allocated_bytes, peak_bytes, peak_allocations, leaked_bytes, leaked_allocations,
      temporary_allocations, temporary_bytes;
};

// site A: 3 x 1000 leaked. B: 10 x 4096, all live at the peak, all freed,
// the last one before B allocates again (1 temporary). C: 100 malloc(64)/free
// pairs (100 temporaries), after the peak.
inline constexpr Figures kSiteA = {3, 3000, 3000, 3, 3000, 3, 0, 0};
inline constexpr Figures kSiteB = {10, 40960, 40960, 10, 0, 0, 1, 4096};
inline constexpr Figures kSiteC = {100, 6400, 0, 0, 0, 0, 100, 6400};
// The program allocates nothing else.
inline constexpr Figures kFiguresTotals = {113, 50360, 43960, 13, 3000, 3, 101, 10496};

}  // namespace memtrack::testing
