#include "analyze/suppressions.h"

#include <sstream>
#include <stdexcept>

#include "io/untrusted_file.h"

namespace memtrack {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Does `pattern` (no '*', no anchors) match `text` at `at`?
bool literal_at(std::string_view text, size_t at, std::string_view literal) {
  return text.size() >= at + literal.size() && text.compare(at, literal.size(), literal) == 0;
}

}  // namespace

bool suppression_pattern_matches(std::string_view pattern, std::string_view text) {
  // As LeakSanitizer: nothing matches an empty name, and a pattern of only
  // anchors matches nothing.
  if (pattern.empty() || text.empty()) return false;
  bool anchored_start = pattern.front() == '^';
  if (anchored_start) pattern.remove_prefix(1);
  bool anchored_end = !pattern.empty() && pattern.back() == '$';
  if (anchored_end) pattern.remove_suffix(1);
  if (pattern.empty()) return false;
  // Split on '*': each piece must appear in order; the first at the start
  // when anchored, the last at the end when anchored.
  std::vector<std::string_view> pieces;
  size_t begin = 0;
  for (size_t star; (star = pattern.find('*', begin)) != std::string_view::npos; begin = star + 1)
    pieces.push_back(pattern.substr(begin, star - begin));
  pieces.push_back(pattern.substr(begin));
  size_t at = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    std::string_view piece = pieces[i];
    bool last = i + 1 == pieces.size();
    if (i == 0 && anchored_start) {
      if (!literal_at(text, 0, piece)) return false;
      at = piece.size();
      if (last && anchored_end) return at == text.size();
      continue;
    }
    if (last && anchored_end) {
      return text.size() >= at + piece.size() && literal_at(text, text.size() - piece.size(), piece);
    }
    size_t found = text.find(piece, at);
    if (found == std::string_view::npos) return false;
    at = found + piece.size();
  }
  return true;
}

Suppressions Suppressions::from_text(std::string_view text, const std::string& origin) {
  Suppressions result;
  size_t line_number = 0;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    std::string_view entry = trim(line);
    if (entry.empty() || entry.front() == '#') continue;
    size_t colon = entry.find(':');
    if (colon == std::string_view::npos || trim(entry.substr(0, colon)) != "leak")
      throw std::runtime_error(origin + ":" + std::to_string(line_number) +
                               ": expected leak:PATTERN (only leak suppressions apply to memory reports)");
    std::string_view pattern = trim(entry.substr(colon + 1));
    if (pattern.empty())
      throw std::runtime_error(origin + ":" + std::to_string(line_number) + ": empty leak: pattern");
    result.add(std::string(pattern));
  }
  return result;
}

Suppressions Suppressions::from_file(const std::string& path) {
  try {
    return from_text(UntrustedFile::open(path, kMaxSuppressionsBytes).read_all(), path);
  } catch (const UntrustedFileError& e) {
    throw std::runtime_error(std::string("suppressions file ") + e.what());
  }
}

bool Suppressions::matches(const Profile& profile, const ProfileSite& site) const {
  for (uint32_t index : site.locations) {
    const ProfileLocation& location = profile.locations[index];
    const std::string* module =
        location.module >= 0 ? &profile.modules[static_cast<size_t>(location.module)].path : nullptr;
    for (const std::string& pattern : patterns_) {
      if (module && suppression_pattern_matches(pattern, *module)) return true;
      for (const SourceFrame& frame : location.frames) {
        if (suppression_pattern_matches(pattern, frame.function) || suppression_pattern_matches(pattern, frame.file))
          return true;
      }
    }
  }
  return false;
}

}  // namespace memtrack
