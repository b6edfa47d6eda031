// Helpers of the unwind tests: rules compared and printed field by field,
// and this process's file mappings (/proc/self/maps), which turn a code
// address into the (file, file offset) pair the unwind rules are keyed by.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "util/proc_maps.h"
#include "wire/unwind_rule.h"

inline bool operator==(const mt_unwind_rule& a, const mt_unwind_rule& b) {
  return a.cfa_reg == b.cfa_reg && a.flags == b.flags && a.reserved == b.reserved &&
         a.cfa_offset == b.cfa_offset && a.rbp_offset == b.rbp_offset;
}

inline void PrintTo(const mt_unwind_rule& r, std::ostream* os) {
  *os << "{cfa " << (r.cfa_reg == MT_CFA_RBP ? "rbp" : r.cfa_reg == MT_CFA_RSP ? "rsp" : "?") << std::showpos
      << r.cfa_offset << std::noshowpos << ", flags " << unsigned(r.flags) << ", rbp at CFA" << std::showpos
      << r.rbp_offset << std::noshowpos << ", reserved " << r.reserved << "}";
}

namespace memtrack::testing {

inline mt_unwind_rule make_rule(uint8_t cfa_reg, int32_t cfa_offset, uint8_t flags = 0, int32_t rbp_offset = 0) {
  mt_unwind_rule r{};
  r.cfa_reg = cfa_reg;
  r.flags = flags;
  r.cfa_offset = cfa_offset;
  r.rbp_offset = rbp_offset;
  return r;
}

// OUTERMOST and UNSUPPORTED rules carry nothing else.
inline mt_unwind_rule flag_only(uint8_t flags) { return make_rule(0, 0, flags); }

struct SelfMapping {
  uint64_t start;
  uint64_t end;
  uint64_t offset;
  std::string path;  // "[stack]" and the like for anonymous ones
};

struct FileOffset {
  std::string path;
  uint64_t offset;
};

class SelfMaps {
 public:
  SelfMaps() {
    for (const MapEntry& e : read_maps_file("/proc/self/maps")) mappings_.push_back({e.start, e.end, e.offset, e.path});
  }

  const SelfMapping* find(uint64_t address) const {
    for (const SelfMapping& m : mappings_)
      if (address >= m.start && address < m.end) return &m;
    return nullptr;
  }

  const SelfMapping* find_named(const std::string& path) const {
    for (const SelfMapping& m : mappings_)
      if (m.path == path) return &m;
    return nullptr;
  }

  // The file offset of the instruction at `address`.
  std::optional<FileOffset> file_offset(uint64_t address) const {
    const SelfMapping* m = find(address);
    if (!m || m->path.empty() || m->path[0] != '/') return std::nullopt;
    return FileOffset{m->path, address - m->start + m->offset};
  }

  // The file offset of a return address: its mapping is the call's (RA - 1),
  // as the in-kernel walker looks it up.
  std::optional<FileOffset> return_address_offset(uint64_t return_address) const {
    auto call = file_offset(return_address - 1);
    if (call) ++call->offset;
    return call;
  }

 private:
  std::vector<SelfMapping> mappings_;
};

}  // namespace memtrack::testing
