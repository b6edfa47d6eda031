// Counters read from memory the recorded processes can write: the
// interposer's shared files (wire/shared_memory.h, wire/stack_table.h),
// which a command can map and write over ($MEMTRACK_SHM names one). They are
// read like an untrusted file's numbers: a value no recording can reach is
// left out of the trailer and counted in a flag counter, so that neither the
// summary nor the trailer prints garbage such as 18446744073709551615 lost.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>

namespace memtrack {

// 2^40 (1.1e12). Each shared counter counts at most one thing per allocator
// call of a recorded thread (a wait, a walk, a definition, a call in flight
// at a process's start) or per process (a not-first interposer, the arena's
// allocations and bytes, at most 64 KiB a process): at the interposer's
// ~40 ns a call, 2^40 calls are 12 CPU-hours of nothing but allocator calls.
inline constexpr uint64_t kMaxSharedCounter = uint64_t{1} << 40;

// Adds each (name, value) read from shared memory to `out` when plausible;
// out[flag] counts those left out.
inline void add_shared_counters(std::map<std::string, uint64_t>& out,
                                std::initializer_list<std::pair<const char*, uint64_t>> read, const char* flag) {
  uint64_t implausible = 0;
  for (const auto& [name, value] : read) {
    if (value <= kMaxSharedCounter)
      out[name] = value;
    else
      ++implausible;
  }
  out[flag] = implausible;
}

}  // namespace memtrack
