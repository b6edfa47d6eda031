#include "report/folded_output.h"

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "analyze/call_tree.h"
#include "report/utf8.h"

namespace memtrack {
namespace {

// ';' separates frames and a line break ends a record: neither may appear in
// a frame's text. Spaces may: readers take the value after the last space.
std::string sanitized(const std::string& raw) {
  std::string text = valid_utf8(raw);  // read as UTF-8 text by flame graph tools
  for (char& c : text) {
    if (c == ';')
      c = ':';
    else if (c == '\n' || c == '\r')
      c = ' ';
  }
  return text;
}

}  // namespace

void write_folded(const Profile& profile, CostKind cost, std::ostream& out) {
  std::map<std::string, uint64_t> stacks;  // sorted: deterministic output
  std::vector<std::string> frames;
  for (const ProfileSite& site : profile.sites) {
    uint64_t value = cost_of(site.costs, cost);
    if (value == 0) continue;
    frames.clear();
    if (site.locations.empty()) frames.push_back("[no stack]");
    if (site_is_truncated(site)) frames.push_back(kTruncatedLabel);
    // Sites list locations innermost first; folded stacks start at the root.
    for (auto it = site.locations.rbegin(); it != site.locations.rend(); ++it) {
      if (*it >= profile.locations.size())
        throw std::runtime_error("folded output: a site refers to location " + std::to_string(*it) + " of " +
                                 std::to_string(profile.locations.size()));
      const ProfileLocation& location = profile.locations[*it];
      if (location.module >= static_cast<int64_t>(profile.modules.size()))
        throw std::runtime_error("folded output: a location refers to module " + std::to_string(location.module) +
                                 " of " + std::to_string(profile.modules.size()));
      // A function's call sites merge, as in every flame graph.
      std::vector<std::string> labels = frame_labels(profile, location, FrameNaming::Function);
      frames.insert(frames.end(), labels.rbegin(), labels.rend());
    }
    std::string text;
    for (size_t i = 0; i < frames.size(); ++i) {
      if (i > 0) text += ';';
      text += sanitized(frames[i]);
    }
    stacks[text] += value;
  }
  for (const auto& [text, value] : stacks) out << text << ' ' << value << '\n';
  out.flush();
  if (!out) throw std::runtime_error("folded output: writing failed");
}

}  // namespace memtrack
