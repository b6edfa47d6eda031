// The HTML pages, generated from src/output/html/ at build time: what comes
// before and after the embedded JSON data. page.* is the report's page,
// diff.* the diff's.
#pragma once

#include <ostream>
#include <string_view>

namespace memtrack {

extern const std::string_view kHtmlPageBefore;
extern const std::string_view kHtmlPageAfter;
extern const std::string_view kHtmlDiffPageBefore;
extern const std::string_view kHtmlDiffPageAfter;

// before + data + after, the JSON `data` made safe inside its
// <script type="application/json"> element: no name from a recording can
// become markup.
void write_html_page(std::string_view before, std::string_view data, std::string_view after, std::ostream& out);

}  // namespace memtrack
