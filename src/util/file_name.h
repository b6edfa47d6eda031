// The file name of a path: what follows its last '/' (the whole path when it
// has none), as reports print modules and source files.
#pragma once

#include <string_view>

namespace memtrack {

inline std::string_view file_name_of(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace memtrack
