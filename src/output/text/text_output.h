// The human-readable report: fits an 80-column terminal; ANSI colors only
// when asked for.
#pragma once

#include <ostream>

#include "analyze/report.h"
#include "output/profile_view.h"

namespace memtrack {

struct TextOptions {
  bool color = false;    // ANSI colors (the layout is the same)
  bool verbose = false;  // also every table: stack outcomes, call paths in full,
                         // processes, allocation sizes, recorder counters
};

// With a view, the call-path sections (profile_text.h) follow the totals.
void write_text_report(const Report& report, std::ostream& out, const TextOptions& options,
                       const ProfileView* view = nullptr);

}  // namespace memtrack
