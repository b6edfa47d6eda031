// TscClock (src/record/intake/tsc_clock.h): the conversion of the
// interposers' TSC ticks to CLOCK_MONOTONIC ns is monotone, never changes for
// a tick once converted, follows a clock whose rate drifts within a reading's
// error, and never goes back when the clock steps.
#include "record/intake/tsc_clock.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "util/monotonic_clock.h"

namespace memtrack {
namespace {

// A clock of 0.4 ns per tick whose rate drifts by `ppm_per_ms` each ms.
struct DriftingClock {
  double ns_per_tick = 0.4, ppm_per_ms = 0;
  uint64_t tsc = 1000000, ns = 5000000000;
  TscClock::Reading advance(uint64_t ticks) {
    tsc += ticks;
    ns += static_cast<uint64_t>(std::llround(ticks * ns_per_tick));
    ns_per_tick *= 1 + ppm_per_ms * 1e-6 * (ticks * ns_per_tick / 1e6);
    return {tsc, ns};
  }
};

TEST(TscClock, FollowsADriftingClockWithinAMicrosecond) {
  DriftingClock clock;
  clock.ppm_per_ms = 0.05;  // 50 ppm a second: NTP slews at most 500 ppm in all
  TscClock converter({clock.tsc, clock.ns});
  int64_t worst = 0;
  for (int ms = 0; ms < 3000; ++ms) {
    TscClock::Reading truth = clock.advance(2500000);  // 1 ms
    // Before the reading, as the recorder converts the ticks since the last.
    int64_t error = static_cast<int64_t>(converter.to_ns(truth.tsc)) - static_cast<int64_t>(truth.ns);
    if (ms > 0) worst = std::max(worst, std::abs(error));
    // A reading is off by up to 20 ns.
    TscClock::Reading read = truth;
    read.ns += static_cast<uint64_t>((ms * 7919) % 41) - 20;
    converter.take_reading(read);
  }
  EXPECT_LT(worst, 1000) << "ns";
  EXPECT_LT(converter.max_error_ns(), 1000u);
}

TEST(TscClock, AConvertedTickKeepsItsTimeAndTheOrderHolds) {
  DriftingClock clock;
  TscClock converter({clock.tsc, clock.ns});
  converter.take_reading(clock.advance(2500000));
  std::vector<std::pair<uint64_t, uint64_t>> converted;  // tick, ns
  uint64_t tick = clock.tsc;
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 100; ++i) {
      tick += 25000;  // 10 us
      converted.push_back({tick, converter.to_ns(tick)});
    }
    // The clock is found ahead and behind in turn: each reading steers.
    TscClock::Reading r = clock.advance(2500000);
    r.ns += round % 2 ? 30000 : -30000;
    converter.take_reading(r);
    tick = std::max(tick, r.tsc);
  }
  uint64_t previous = 0;
  for (const auto& [t, ns] : converted) {
    EXPECT_EQ(converter.to_ns(t), ns) << "tick " << t;
    EXPECT_GE(ns, previous);
    previous = ns;
  }
}

TEST(TscClock, AStepOfTheClockIsFollowedForwardAndNeverBack) {
  DriftingClock clock;
  TscClock converter({clock.tsc, clock.ns});
  converter.take_reading(clock.advance(2500000));
  uint64_t before_step = converter.to_ns(clock.tsc + 1000);
  // The clock jumps 50 ms ahead of the ticks: caught up at the next reading.
  TscClock::Reading r = clock.advance(2500000);
  r.ns += 50000000;
  clock.ns = r.ns;
  converter.take_reading(r);
  EXPECT_EQ(converter.to_ns(r.tsc), r.ns);
  EXPECT_GE(converter.to_ns(r.tsc), before_step);
  // And 50 ms behind: the conversion slows until the clock meets it, never
  // giving a tick a time before an earlier tick's.
  uint64_t last = converter.to_ns(clock.tsc);
  r = clock.advance(2500000);
  r.ns -= 50000000;
  clock.ns = r.ns;
  converter.take_reading(r);
  for (int ms = 0; ms < 400; ++ms) {
    uint64_t now = converter.to_ns(clock.tsc + 1);
    EXPECT_GE(now, last);
    last = now;
    converter.take_reading(clock.advance(2500000));
  }
  EXPECT_LT(std::abs(static_cast<int64_t>(converter.to_ns(clock.tsc)) - static_cast<int64_t>(clock.ns)), 1000);
}

TEST(TscClock, ACpuWhoseTscIsOutOfStepIsFound) {
  // 0.4 ns a tick; CPU 0 first and last, 10 us apart.
  auto at = [](int cpu, uint64_t tsc, int64_t off_ns) {
    return TscClock::CpuReading{cpu, {tsc, static_cast<uint64_t>(1000000000 + static_cast<int64_t>(tsc * 0.4) + off_ns)}};
  };
  std::vector<TscClock::CpuReading> in_step = {at(0, 1000, 0), at(1, 9000, 15), at(2, 17000, -20), at(0, 26000, 0)};
  EXPECT_FALSE(TscClock::tsc_out_of_step(in_step));
  std::vector<TscClock::CpuReading> off = {at(0, 1000, 0), at(1, 9000, 0), at(2, 17000, -5000), at(0, 26000, 0)};
  std::optional<TscClock::CpuReading> found = TscClock::tsc_out_of_step(off);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->cpu, 2);
}

TEST(TscClock, EveryCpuIsReadThenTheFirstAgain) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  std::vector<TscClock::CpuReading> readings = TscClock::readings_on_each_cpu();
  ASSERT_GE(readings.size(), 2u);
  std::set<int> read;
  for (size_t i = 0; i + 1 < readings.size(); ++i) EXPECT_TRUE(read.insert(readings[i].cpu).second);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) {
      EXPECT_TRUE(read.count(cpu)) << "CPU " << cpu << " not read";
    }
  }
  EXPECT_EQ(readings.back().cpu, readings.front().cpu);
  // The caller's own affinity is left alone.
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&allowed, &after));
  std::string why;
  if (std::optional<TscClock::CpuReading> off = TscClock::tsc_out_of_step(readings)) {
    EXPECT_FALSE(TscClock::usable(&why)) << "CPU " << off->cpu << " out of step, yet the TSC is used";
  }
}

TEST(TscClock, OnThisMachineTicksGiveTheMonotonicClock) {
  std::string why;
  if (!TscClock::usable(&why)) GTEST_SKIP() << "the TSC is not used here: " << why;
  TscClock converter;
  EXPECT_FALSE(converter.has_rate());
  converter.take_reading();
  ASSERT_TRUE(converter.has_rate());
  for (int i = 0; i < 20; ++i) {
    uint64_t before = monotonic_ns();
    uint64_t tick = TscClock::ticks();
    uint64_t after = monotonic_ns();
    uint64_t ns = converter.to_ns(tick);
    EXPECT_GE(ns + 2000, before);
    EXPECT_LE(ns, after + 2000);
    timespec pause{0, 2000000};
    nanosleep(&pause, nullptr);
    converter.take_reading();
  }
}

}  // namespace
}  // namespace memtrack
