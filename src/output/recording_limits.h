// What a recording that ends before its processes, or began after them
// (record --pid), cannot know: the sentences the text header, the JSON's
// `recording_limits` and the HTML page say alike (docs/REPORT.md,
// "A recording that ends before the process").
#pragma once

#include <string>
#include <vector>

#include "analyze/report.h"

namespace memtrack {

// One sentence per limit; empty for a command recorded to its end.
std::vector<std::string> recording_limits(const Report& report);

}  // namespace memtrack
