#include <libiberty/demangle.h>

#include <cstdlib>
#include <string>

#include "symbolize/symbolizer.h"

namespace memtrack {

std::string demangle(std::string_view symbol) {
  // Itanium (_Z, with an optional extra leading underscore) and Rust v0
  // (_R) names; anything else is a plain name.
  const bool mangled = symbol.starts_with("_Z") || symbol.starts_with("__Z") || symbol.starts_with("_R");
  if (!mangled) return std::string(symbol);
  const std::string input(symbol);  // NUL-terminated for libiberty
  // DMGL_AUTO: Rust first (legacy Rust names are valid Itanium ones; without
  // DMGL_VERBOSE its hash is dropped), then Itanium. DMGL_RUST alone would
  // refuse C++ names.
  char* out = cplus_demangle(input.c_str(), DMGL_PARAMS | DMGL_ANSI | DMGL_AUTO);
  if (!out) return input;
  std::string result(out);
  std::free(out);
  return result;
}

}  // namespace memtrack
