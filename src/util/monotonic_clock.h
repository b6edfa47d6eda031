// CLOCK_MONOTONIC in nanoseconds: the clock of the events' timestamps, as
// the recorder's threads compare them.
#pragma once

#include <time.h>

#include <cstdint>

namespace memtrack {

inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

}  // namespace memtrack
