// The HTML report's page, generated from src/output/html/ at build time:
// what comes before and after the embedded JSON data.
#pragma once

#include <string_view>

namespace memtrack {

extern const std::string_view kHtmlPageBefore;
extern const std::string_view kHtmlPageAfter;

}  // namespace memtrack
