/* When an interposer event happened, in the clock the recorder chose for the
 * recording (the shared header's `clock`): TSC ticks, which the recorder turns
 * into CLOCK_MONOTONIC ns (record/intake/tsc_clock.h), or CLOCK_MONOTONIC.
 * The TSC costs a thread 11 ns here, clock_gettime 25-28: one of them is read
 * at every allocator call.
 *
 * `after_call`: the time of an allocation, read after the real call returned
 * its block, must follow everything that call did (another thread's free of
 * that block included): the fence keeps the CPU from reading the TSC early. A
 * free's time, read before its real call, may only come early: no fence. */
#ifndef MEMTRACK_EVENT_TIME_H
#define MEMTRACK_EVENT_TIME_H

#include <time.h>
#include <x86intrin.h>

#include "wire/shared_memory.h"

static inline __u64 mt_event_time(int tsc, int after_call) {
  if (__builtin_expect(tsc, 1)) {
    if (after_call) _mm_lfence();
    return __rdtsc();
  }
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (__u64)now.tv_sec * 1000000000ull + (__u64)now.tv_nsec;
}

#endif
