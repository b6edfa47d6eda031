// LeakSanitizer-style suppression files: one `leak:PATTERN` per line, `#`
// comments and blank lines ignored. A pattern matches a frame whose
// function, source file or module path contains it; `*` matches any run of
// characters, a leading `^` / trailing `$` anchor it at the start / end.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analyze/profile.h"

namespace memtrack {

// LSan's own files are a few KiB; anything this big is not one.
inline constexpr uint64_t kMaxSuppressionsBytes = uint64_t{16} << 20;

class Suppressions {
 public:
  // Throws std::runtime_error naming the file and line of anything else than
  // leak: entries (other LSan/TSan kinds are not leaks: refused, not ignored),
  // and naming the file when it is not a regular file of at most
  // kMaxSuppressionsBytes.
  static Suppressions from_file(const std::string& path);
  static Suppressions from_text(std::string_view text, const std::string& origin);

  void add(std::string pattern) { patterns_.push_back(std::move(pattern)); }
  bool empty() const { return patterns_.empty(); }
  // True when a pattern matches any frame of the site.
  bool matches(const Profile& profile, const ProfileSite& site) const;

 private:
  std::vector<std::string> patterns_;
};

// LSan's template match: `*` wildcards, `^`/`$` anchors, otherwise a substring.
bool suppression_pattern_matches(std::string_view pattern, std::string_view text);

}  // namespace memtrack
