// Random traces for property tests of the heap replay and of the artifact's
// layouts: every record kind and the awkward cases (lost and unmatched
// frees, failed allocations and reallocs, realloc(p, 0), pid reuse, forks,
// execs and exits).
#pragma once

#include <cstdint>
#include <random>

#include "support/trace_builder.h"

namespace memtrack::testing {

// `forks_copy_blocks`: children of traced parents (who inherit live blocks),
// else only children of an untraced parent.
inline TraceBuilder random_trace(uint64_t seed, bool forks_copy_blocks) {
  std::mt19937_64 rng(seed);
  auto below = [&](uint64_t n) { return rng() % n; };
  TraceBuilder t;
  constexpr int32_t kPids = 4;
  // Few addresses per pid, so addresses are reused, blocks replaced and
  // frees unmatched.
  auto address = [&](int32_t pid) { return (uint64_t{static_cast<uint32_t>(pid)} << 20) + 16 * (1 + below(24)); };
  auto pid_at = [&] { return static_cast<int32_t>(100 + below(kPids)); };
  auto size = [&] { return below(10) == 0 ? 0 : 1 + below(4096); };
  auto stack = [&] { return below(8) == 0 ? 0 : 1 + below(12); };
  for (int i = 0; i < 2000; ++i) {
    const int32_t pid = pid_at();
    const int32_t tid = pid * 10 + static_cast<int32_t>(below(3));
    const uint64_t roll = below(100);
    const uint64_t addr = below(20) == 0 ? 0 : address(pid);  // 0: a failed allocation, or free(NULL)
    if (roll < 20) {
      t.malloc(pid, tid, addr, size()).stack(stack());
    } else if (roll < 27) {
      t.calloc(pid, tid, addr, size()).stack(stack());
    } else if (roll < 32) {
      t.aligned_alloc(pid, tid, addr, size()).stack(stack());
    } else if (roll < 45) {
      uint64_t old_addr = below(6) == 0 ? 0 : address(pid);
      t.realloc(pid, tid, old_addr, addr, size()).stack(stack());
    } else if (roll < 92) {
      t.free(pid, tid, addr);
    } else if (roll < 95) {
      t.fork(forks_copy_blocks ? pid_at() : 1, pid);
    } else if (roll < 97) {
      t.exec(pid, {"next"});
    } else {
      t.exit(pid, 0);
    }
  }
  return t;
}

}  // namespace memtrack::testing
