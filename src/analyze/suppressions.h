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

// The built-in list of allocations the C and C++ runtimes make once and keep
// for the whole process (docs/REPORT.md, "Runtime allocations"): a site
// with a frame whose function matches one of kRuntimePatterns (glibc's
// stdio buffers, locale data, nss modules, time zone, the static result
// buffers of getpwuid & co., atexit's handler blocks; libstdc++'s emergency
// exception pool when it is named), or whose path stays in the runtime's
// files (libc, libstdc++, libgcc_s, libm, ld.so) from the allocator's caller
// up to the dynamic loader's call_init/_dl_init: a runtime library's own
// static constructor (libstdc++'s emergency exception pool when unnamed).
extern const std::vector<std::string_view> kRuntimePatterns;
bool is_runtime_allocation(const Profile& profile, const ProfileSite& site);

// LSan's template match: `*` wildcards, `^`/`$` anchors, otherwise a substring.
bool suppression_pattern_matches(std::string_view pattern, std::string_view text);

}  // namespace memtrack
