// The text report's memory-over-time section: a chart of the heap and RSS
// in 80 columns of plain ASCII (it reads the same in a log file), the peaks
// with their times, and per process the heap peak, RSS peak and their ratio.
#pragma once

#include <ostream>

#include "analyze/timeline.h"

namespace memtrack {

void write_timeline_text(const Timeline& timeline, std::ostream& out, bool color, bool verbose);

}  // namespace memtrack
