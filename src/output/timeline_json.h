// The JSON report's "timeline" member and the CSV output of the same series
// (docs/REPORT.md, "timeline").
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "analyze/timeline.h"

namespace memtrack {

nlohmann::json timeline_json(const Timeline& timeline);
// One row per bucket: the total's, then each process's.
void write_timeline_csv(const Timeline& timeline, std::ostream& out);

}  // namespace memtrack
