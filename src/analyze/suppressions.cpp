#include "analyze/suppressions.h"

#include <sstream>
#include <stdexcept>

#include "io/untrusted_file.h"
#include "util/file_name.h"

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

bool in_runtime_file(const Profile& profile, const ProfileLocation& location) {
  if (location.module < 0 || static_cast<size_t>(location.module) >= profile.modules.size()) return false;
  std::string_view file = file_name_of(profile.modules[static_cast<size_t>(location.module)].path);
  for (std::string_view runtime : {"libc.so", "libstdc++.so", "libgcc_s.so", "libm.so", "ld-linux"})
    if (file.starts_with(runtime)) return true;
  return false;
}

bool is_loader_init(const ProfileLocation& location) {
  for (const SourceFrame& frame : location.frames)
    if (frame.function == "call_init" || frame.function == "_dl_init") return true;
  return false;
}

}  // namespace

const std::vector<std::string_view> kRuntimePatterns = {
    "_IO_file_doallocate",                // stdio stream buffers
    "_nl_find_locale",                    // setlocale/newlocale data (glibc never frees it)
    "nss_database_",                      // nss configuration (nsswitch.conf)
    "__nss_module_",                      // nss service modules
    "tzset_internal",                     // time zone data
    "^getpwuid$", "^getpwnam$", "^getgrgid$", "^getgrnam$", "^getpwent$", "^getgrent$",
    "^gethostbyname$", "^gethostbyname2$", "^gethostbyaddr$", "^getservbyname$", "^getservbyport$",
    "^getprotobyname$", "^getprotobynumber$",  // their static result buffers
    "__new_exitfn",                       // atexit/__cxa_atexit handler blocks
    "allocate_dtv",                       // a thread's TLS vector: glibc caches exited threads' stacks with it
    "(anonymous namespace)::pool::pool",  // libstdc++'s emergency exception pool (eh_alloc.cc)
};

bool is_runtime_allocation(const Profile& profile, const ProfileSite& site) {
  for (uint32_t index : site.locations)
    for (const SourceFrame& frame : profile.locations[index].frames)
      for (std::string_view pattern : kRuntimePatterns)
        if (suppression_pattern_matches(pattern, frame.function)) return true;
  size_t i = 0;
  while (i < site.locations.size() && in_runtime_file(profile, profile.locations[site.locations[i]]) &&
         !is_loader_init(profile.locations[site.locations[i]]))
    ++i;
  return i > 0 && i < site.locations.size() && is_loader_init(profile.locations[site.locations[i]]);
}

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
