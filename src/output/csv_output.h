// The csv output: memory over time, the series of the JSON report's
// "timeline" member (docs/REPORT.md, "timeline") as one row per bucket.
#pragma once

#include <ostream>

#include "analyze/timeline.h"

namespace memtrack {

// One row per bucket: the total's, then each process's.
void write_timeline_csv(const Timeline& timeline, std::ostream& out);

}  // namespace memtrack
