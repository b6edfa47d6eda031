// What the symbolizer says of one code address, level by level: the type the
// profile (analyze/profile.h) and every output build on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace memtrack {

// One source-level frame. An address inside inlined code gives several: the
// innermost inlined function first, the function the address is in last.
struct SourceFrame {
  std::string function;  // demangled; empty when no symbol covers the address
  std::string file;      // source file (as DWARF names it); empty without line info
  uint32_t line = 0;     // 0 without line info
  uint32_t column = 0;
  bool inlined = false;  // an inline level, not the function the address is in
  // The address minus the start of the ELF symbol covering it (containing
  // function only): names a call site when there is no line information.
  std::optional<uint64_t> symbol_offset{};
  bool operator==(const SourceFrame&) const = default;
};

}  // namespace memtrack
