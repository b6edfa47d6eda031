// The interposers' event times: TSC ticks, turned into CLOCK_MONOTONIC
// nanoseconds here.
//
// Why: a thread reads the TSC in 11 ns on these VMs, the vDSO's
// clock_gettime in 25-28 ns, and the interposer reads a clock at every
// allocator call. The kernel's CLOCK_MONOTONIC is itself the TSC scaled
// (clocksource tsc or kvm-clock on an invariant TSC), so the recorder can do
// the scaling once per event instead of the program.
//
// The contract:
//   - to_ns() is monotone and never changes for a tick it has converted:
//     events converted at different times (other chunks, later drains) keep
//     their order and equal ticks give equal times.
//   - take_reading() compares the conversion with clock_gettime and steers the
//     conversion of later ticks only (a new piecewise-linear segment from the
//     newest tick on), so the error stays near a reading's own (~20 ns)
//     however the clock's rate drifts; a clock found ahead is slowed, never
//     sent back. Call it now and then (each drain).
//   - The rate is known from the second reading on (has_rate); no tick is
//     to be converted before. The recorder's poller takes one before it
//     converts anything, at each pass.
#pragma once

#include <cmath>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace memtrack {

class TscClock {
 public:
  // Whether the event times may be TSC ticks on this machine: an invariant
  // TSC (constant_tsc, nonstop_tsc) that the kernel's clock is built on,
  // the same on every CPU. `why` says why not. MEMTRACK_CLOCK=monotonic turns it off.
  static bool usable(std::string* why);
  static uint64_t ticks();  // the TSC now (ordered after earlier loads)

  struct Reading {
    uint64_t tsc;
    uint64_t ns;  // CLOCK_MONOTONIC at `tsc`
  };
  struct CpuReading {
    int cpu;
    Reading reading;
  };
  // A reading on each CPU a thread can be placed on, then one more on the
  // first (usable() checks that they all lie on one line).
  static std::vector<CpuReading> readings_on_each_cpu();
  // The first reading off the line through the first and last (which are
  // of one CPU) by more than 2 us: a CPU whose TSC is out of step.
  static std::optional<CpuReading> tsc_out_of_step(const std::vector<CpuReading>& readings);
  TscClock();                        // the first reading, now
  explicit TscClock(Reading first);  // tests: readings given
  void take_reading();  // the second waits until 1 ms after the first
  void take_reading(Reading reading);

  bool has_rate() const { return !segments_.empty(); }
  uint64_t to_ns(uint64_t tsc) const;

  uint64_t readings() const { return readings_; }
  // The largest |conversion - clock_gettime| seen at a reading.
  uint64_t max_error_ns() const { return max_error_ns_; }

 private:
  struct Segment {
    Segment(uint64_t first_tick, uint64_t first_ns, double rate)
        : tsc(first_tick), ns(first_ns), ns_per_tick(rate), ns_per_tick_q32(std::llround(std::ldexp(rate, 32))) {}
    uint64_t tsc;  // first tick of the segment
    uint64_t ns;   // its time
    double ns_per_tick;
    // The same rate in 32.32 fixed point, what at() converts with: an
    // integer multiply at every event rather than conversions to and from
    // double (0.1 ns off after 10^12 ticks).
    uint64_t ns_per_tick_q32;
  };
  static Reading read_now();
  static uint64_t at(const Segment& s, uint64_t tsc);

  std::deque<Reading> baselines_;  // a reading every 0.1 s, the last second's
  std::vector<Segment> segments_;  // by tsc; the last runs on without end
  mutable size_t hint_ = 0;        // the segment of the last tick converted
  // The ticks [hint_first_, hint_end_) that segment holds; empty once the
  // segments change.
  mutable uint64_t hint_first_ = 0, hint_end_ = 0;
  uint64_t readings_ = 1, max_error_ns_ = 0;
};

}  // namespace memtrack
