// The machine-readable report: one JSON object whose schema (version
// kReportFormatVersion) is documented and kept stable in docs/REPORT.md.
#pragma once

#include <ostream>
#include <string>

#include "analyze/report.h"
#include "output/profile_view.h"

namespace memtrack {

inline constexpr int kReportFormatVersion = 1;

// With a view, the object gains "profile": call-path outcomes and sites.
void write_json_report(const Report& report, std::ostream& out, const ProfileView* view = nullptr);
// The same document on one line (the HTML report embeds it).
std::string compact_json_report(const Report& report, const ProfileView* view = nullptr);

}  // namespace memtrack
