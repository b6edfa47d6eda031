// The JSON report's "timeline" member (docs/REPORT.md, "timeline").
#pragma once

#include <nlohmann/json.hpp>

#include "analyze/timeline.h"

namespace memtrack {

nlohmann::json timeline_json(const Timeline& timeline);

}  // namespace memtrack
