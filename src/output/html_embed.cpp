#include "output/html_page.h"

#include <string>

namespace memtrack {

void write_html_page(std::string_view before, std::string_view data, std::string_view after, std::ostream& out) {
  // Inside <script type="application/json">, only "</script" or "<!--" could
  // end or change the element: JSON allows "<" to be written \u003c, and
  // outside strings JSON has no "<" at all.
  std::string escaped;
  escaped.reserve(data.size() + data.size() / 64);
  for (char c : data) {
    if (c == '<')
      escaped += "\\u003c";
    else
      escaped += c;
  }
  out << before << escaped << after;
}

}  // namespace memtrack
