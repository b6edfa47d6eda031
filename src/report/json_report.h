// The machine-readable report: one JSON object whose schema (version
// kReportFormatVersion) is documented and kept stable in docs/REPORT.md.
#pragma once

#include <ostream>

#include "analyze/report.h"

namespace memtrack {

inline constexpr int kReportFormatVersion = 1;

void write_json_report(const Report& report, std::ostream& out);

}  // namespace memtrack
