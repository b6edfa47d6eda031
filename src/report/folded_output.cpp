#include "report/folded_output.h"

#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

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

std::string hex(uint64_t value) {
  char buffer[24];
  std::snprintf(buffer, sizeof(buffer), "0x%llx", static_cast<unsigned long long>(value));
  return buffer;
}

std::string address_text(const Profile& profile, const ProfileLocation& location) {
  if (location.module < 0) return "[" + hex(location.address) + "]";
  if (location.module >= static_cast<int64_t>(profile.modules.size()))
    throw std::runtime_error("folded output: a location refers to module " + std::to_string(location.module) +
                             " of " + std::to_string(profile.modules.size()));
  const std::string& path = profile.modules[location.module].path;
  std::string basename = path.substr(path.find_last_of('/') + 1);  // npos + 1 == 0: the whole path
  return "[" + basename + "+" + hex(location.file_offset) + "]";
}

// The frames of one location, outermost (the containing function) first.
void append_frames(const Profile& profile, const ProfileLocation& location, std::vector<std::string>* frames) {
  if (location.frames.empty()) {
    frames->push_back(address_text(profile, location));
    return;
  }
  for (auto it = location.frames.rbegin(); it != location.frames.rend(); ++it)
    frames->push_back(it->function.empty() ? address_text(profile, location) : it->function);
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
    // Sites list locations innermost first; folded stacks start at the root.
    for (auto it = site.locations.rbegin(); it != site.locations.rend(); ++it) {
      if (*it >= profile.locations.size())
        throw std::runtime_error("folded output: a site refers to location " + std::to_string(*it) + " of " +
                                 std::to_string(profile.locations.size()));
      append_frames(profile, profile.locations[*it], &frames);
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
