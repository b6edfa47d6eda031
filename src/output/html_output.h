// The HTML report: one self-contained page (styles, script and data inline,
// nothing fetched) with the summary, memory over time, an interactive flame
// graph of the call paths and the tables of the JSON report. The call trees
// are aggregated here, for every cost at once, and pruned so that the page
// stays a few MB whatever the recording (docs/REPORT.md, "HTML report").
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "analyze/report.h"
#include "output/profile_view.h"

namespace memtrack {

// Tree nodes below this share of the root in every cost are merged into one
// "[other]" node per parent.
inline constexpr double kHtmlPrunePercent = 0.1;
// Call paths embedded with their frames: the costliest ones of each cost.
inline constexpr size_t kHtmlSitesPerCost = 500;
// At most this many (slice of time, allocations, bytes) entries of the call
// paths over time, which let the page filter them by a window of time: the
// slices are coarsened until they fit.
inline constexpr size_t kHtmlWindowEntries = 60'000;

// The data the page embeds, as compact JSON: the JSON report's document
// ("report", with its timeline when the recording has one), a frame table,
// the top-down and bottom-up trees with every cost, the costliest call paths.
std::string html_report_data(const Report& report, const ProfileView& view);

// The whole page. Every name from the recording is JSON data inside it,
// never markup.
void write_html_report(const Report& report, const ProfileView& view, std::ostream& out);

}  // namespace memtrack
