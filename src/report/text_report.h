// The human-readable report: fits an 80-column terminal; ANSI colors only
// when asked for.
#pragma once

#include <ostream>

#include "analyze/report.h"

namespace memtrack {

void write_text_report(const Report& report, std::ostream& out, bool color);

}  // namespace memtrack
