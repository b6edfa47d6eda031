// The allocator entry points of an ELF file and where to probe them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace memtrack {

struct ProbeSite {
  std::string symbol;      // the preferred catalogue name at this address, e.g. "malloc"
  std::vector<std::string> aliases;  // other catalogue names at the same address
  uint64_t symbol_offset = 0;  // file offset of the function entry
  uint64_t probe_offset = 0;   // file offset where the probe goes (see probe_placement.h)
  uint64_t cookie = 0;         // MT_COOKIE(...) describing the arguments
  bool needs_return = false;   // allocation functions: true; free-like and unwinder: false
  std::string placement;   // why probe_offset, e.g. "+3: jcc after test (emulated)"
  // glibc's shared free: MT_COOKIE_RUNTIME_FREE_OF(...) (wire/probe_cookie.h), for the
  // attacher to add to the cookie, so that the probe tells libc's own
  // releases from the program's frees; 0 elsewhere.
  uint64_t runtime_free_bits = 0;
};

// One entry of the catalogue of allocator entry points.
struct AllocatorFunction {
  std::string name;
  uint64_t cookie;
  // Position in the catalogue: when several names share one address the
  // lowest rank names the site and gives its cookie.
  int rank;
};

// The catalogue entry for `name` (a trailing "@VERSION" is ignored), or
// nullptr when it is not an allocator entry point.
const AllocatorFunction* find_allocator_function(std::string_view name);

// All allocator entry points defined in the x86-64 ELF executable or shared
// object at `path`, from .symtab and .dynsym, one per address, ordered by
// symbol_offset. Empty for ELF files without allocators. Throws
// std::runtime_error naming the file for unreadable, non-ELF, truncated or
// unsupported (not x86-64 ELF64 ET_EXEC/ET_DYN) files.
std::vector<ProbeSite> find_probe_sites(const std::string& path);

}  // namespace memtrack
