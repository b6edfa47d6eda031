#include "record/intake/tsc_clock.h"

#include <sched.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <x86intrin.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "util/monotonic_clock.h"
#include "util/proc_text.h"

namespace memtrack {

namespace {

// A reading's error is corrected over the next this many ns of the clock.
constexpr double kSteerNs = 1e6;
// Readings closer than this to the last segment's start only measure.
constexpr uint64_t kMinSegmentNs = 1000000;
// Segments kept: ticks older than the oldest are converted on its line.
constexpr size_t kMaxSegments = 4096;
// An error beyond this is steered at once, whenever the last segment began.
constexpr int64_t kSteerAtOnceNs = 10000;
// The shortest baseline of the first rate: a reading's error (~20 ns) is
// then 2e-5 of it, 0.2 us over the 10 ms until the poller's next reading.
constexpr uint64_t kFirstBaselineNs = 1000000;
// Readings kept to measure the rate: one per kBaselineNs.
constexpr uint64_t kBaselineNs = 100000000;
constexpr size_t kBaselines = 10;
// Conversion behind the clock by more than this (a step of the TSC against
// the clock): the next segment starts at the clock's time.
constexpr int64_t kStepNs = 1000000;

bool has_flag(const std::string& flags, const std::string& flag) {
  std::istringstream words(flags);
  std::string word;
  while (words >> word)
    if (word == flag) return true;
  return false;
}

}  // namespace

bool TscClock::usable(std::string* why) {
  if (const char* clock = std::getenv("MEMTRACK_CLOCK"); clock && std::string(clock) == "monotonic") {
    *why = "MEMTRACK_CLOCK=monotonic";
    return false;
  }
  std::istringstream cpuinfo(read_proc_text("/proc/cpuinfo").value_or(""));
  std::string line, flags;
  while (std::getline(cpuinfo, line))
    if (line.starts_with("flags")) {
      flags = line;
      break;
    }
  for (const char* flag : {"constant_tsc", "nonstop_tsc"})
    if (!has_flag(flags, flag)) {
      *why = std::string("the CPU's TSC is not invariant (no ") + flag + " in /proc/cpuinfo)";
      return false;
    }
  std::string source = read_proc_text("/sys/devices/system/clocksource/clocksource0/current_clocksource").value_or("");
  source = source.substr(0, source.find('\n'));
  if (source != "tsc" && source != "kvm-clock" && source != "hyperv_clocksource_tsc_page") {
    *why = "the kernel's clock is not built on the TSC (clocksource " + (source.empty() ? "unknown" : source) + ")";
    return false;
  }
  // kvm-clock trusts the host to keep the vCPUs' TSCs in step: checked.
  std::vector<CpuReading> readings = readings_on_each_cpu();
  if (std::optional<CpuReading> off = tsc_out_of_step(readings)) {
    *why = "CPU " + std::to_string(off->cpu) + "'s TSC is out of step with CPU " + std::to_string(readings[0].cpu) +
           "'s";
    return false;
  }
  return true;
}

std::vector<TscClock::CpuReading> TscClock::readings_on_each_cpu() {
  std::vector<CpuReading> readings;
  // In a thread of its own: the caller's CPU affinity stays as it was.
  // Every CPU the thread can be placed on, not only the recorder's: a
  // recorded process may run on others (--pid, or its own affinity).
  std::thread([&readings] {
    const int cpus = std::min(get_nprocs_conf(), CPU_SETSIZE);
    int first = -1;
    for (int cpu = 0; cpu < cpus; ++cpu) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      if (sched_setaffinity(0, sizeof(one), &one) != 0) continue;
      if (first < 0) first = cpu;
      readings.push_back({cpu, read_now()});
    }
    if (first < 0) return;
    // Back on the first: the line the others must lie on.
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (sched_setaffinity(0, sizeof(one), &one) == 0) readings.push_back({first, read_now()});
  }).join();
  return readings;
}

std::optional<TscClock::CpuReading> TscClock::tsc_out_of_step(const std::vector<CpuReading>& readings) {
  // The first and last readings are of one CPU: the others lie on their line
  // unless their TSC is offset (a reading's own error is ~20 ns).
  constexpr double kToleranceNs = 2000;
  if (readings.size() < 3) return std::nullopt;
  const Reading& a = readings.front().reading;
  const Reading& b = readings.back().reading;
  if (b.tsc <= a.tsc || b.ns <= a.ns) return readings.back();
  const double rate = static_cast<double>(b.ns - a.ns) / static_cast<double>(b.tsc - a.tsc);
  for (const CpuReading& r : readings) {
    const double expected =
        static_cast<double>(a.ns) + (static_cast<double>(r.reading.tsc) - static_cast<double>(a.tsc)) * rate;
    if (std::abs(static_cast<double>(r.reading.ns) - expected) > kToleranceNs) return r;
  }
  return std::nullopt;
}

uint64_t TscClock::ticks() {
  // After every earlier load: a tick read here follows the events it drains.
  _mm_lfence();
  return __rdtsc();
}

TscClock::Reading TscClock::read_now() {
  // The clock's time between two ticks: the reading is as precise as that
  // bracket (~100 ticks), unless the thread was interrupted inside it: the
  // narrowest of a few.
  Reading best{};
  uint64_t narrowest = UINT64_MAX;
  for (int attempt = 0; attempt < 8; ++attempt) {
    uint64_t before = ticks();
    uint64_t ns = monotonic_ns();
    uint64_t after = ticks();
    if (after - before < narrowest) {
      narrowest = after - before;
      best = {before + (after - before) / 2, ns};
    }
    if (narrowest < 200) break;
  }
  return best;
}

TscClock::TscClock() : TscClock(read_now()) {}

TscClock::TscClock(Reading first) : baselines_{first} {}

void TscClock::take_reading() {
  // The rate needs a baseline: the second reading at least kFirstBaselineNs
  // after the first (the recorder's first drain comes ~0.2 s after; a sooner
  // one waits the rest).
  if (segments_.empty()) {
    const uint64_t since = monotonic_ns() - baselines_.front().ns;
    if (since < kFirstBaselineNs) {
      timespec pause{0, static_cast<long>(kFirstBaselineNs - since)};
      nanosleep(&pause, nullptr);
    }
  }
  take_reading(read_now());
}

uint64_t TscClock::at(const Segment& s, uint64_t tsc) {
  // Multiplying by a positive constant keeps the order of the ticks.
  auto ns_in = [&](uint64_t ticks) {
    return (static_cast<unsigned __int128>(ticks) * s.ns_per_tick_q32) >> 32;
  };
  if (tsc >= s.tsc) {
    unsigned __int128 later = ns_in(tsc - s.tsc);
    return later >= UINT64_MAX - s.ns ? UINT64_MAX : s.ns + static_cast<uint64_t>(later);
  }
  unsigned __int128 earlier = ns_in(s.tsc - tsc);
  return earlier >= s.ns ? 0 : s.ns - static_cast<uint64_t>(earlier);
}

void TscClock::take_reading(Reading r) {
  const Reading base = baselines_.front();
  if (r.tsc <= baselines_.back().tsc || r.ns <= baselines_.back().ns) return;
  // The rate over the last second or so: long enough that a reading's own
  // error weighs little, short enough to follow the clock's slewing.
  const double rate = static_cast<double>(r.ns - base.ns) / static_cast<double>(r.tsc - base.tsc);
  if (r.ns - baselines_.back().ns >= kBaselineNs) {
    baselines_.push_back(r);
    if (baselines_.size() > kBaselines) baselines_.pop_front();
  }
  if (segments_.empty()) {
    segments_.push_back({base.tsc, base.ns, rate});
    hint_end_ = 0;
    ++readings_;
    return;
  }
  // The segment in effect at this tick: a steering's planned end may lie
  // beyond it.
  size_t current = segments_.size() - 1;
  while (current > 0 && segments_[current].tsc > r.tsc) --current;
  const Segment in_effect = segments_[current];
  ++readings_;
  const uint64_t converted = at(in_effect, r.tsc);
  const int64_t error = static_cast<int64_t>(converted - r.ns);
  max_error_ns_ = std::max<uint64_t>(max_error_ns_, static_cast<uint64_t>(std::abs(error)));
  const bool step = error < -kStepNs;
  // Readings come at every drain: new segments a ms apart at most, unless
  // the conversion is off by more than a reading's own error.
  if (!step && static_cast<double>(r.tsc - in_effect.tsc) * in_effect.ns_per_tick < kMinSegmentNs &&
      std::abs(error) < kSteerAtOnceNs)
    return;
  // No tick past this one was converted (they are read later): what was
  // planned beyond it is replanned.
  hint_end_ = 0;
  segments_.erase(segments_.begin() + static_cast<std::ptrdiff_t>(current) + 1, segments_.end());
  if (step) {
    // Far behind (the clock stepped): caught up at once, forward.
    segments_.push_back({r.tsc, r.ns, rate});
  } else {
    // Ahead or behind: a rate that meets the clock kSteerNs from now (never
    // below half or above twice the clock's: ahead, slowed, never sent
    // back), then the clock's own rate, however long until the next reading.
    const double steered = std::clamp(rate * (1.0 - static_cast<double>(error) / kSteerNs), rate / 2, rate * 2);
    const Segment steering{r.tsc, converted, steered};
    const uint64_t end = r.tsc + static_cast<uint64_t>(kSteerNs / rate);
    segments_.push_back(steering);
    segments_.push_back({end, at(steering, end), rate});
  }
  // Oldest first, a batch at a time (the ticks still to convert are recent).
  if (segments_.size() > 2 * kMaxSegments) segments_.erase(segments_.begin(), segments_.begin() + kMaxSegments);
}

uint64_t TscClock::to_ns(uint64_t tsc) const {
  if (segments_.empty()) return at({baselines_.front().tsc, baselines_.front().ns, 1.0}, tsc);  // no rate yet
  // A thread's events come in order, each mostly in its predecessor's
  // segment (drained events precede the last reading: rarely the last one).
  if (tsc < hint_first_ || tsc >= hint_end_) {
    auto after = std::upper_bound(segments_.begin(), segments_.end(), tsc,
                                  [](uint64_t t, const Segment& s) { return t < s.tsc; });
    hint_ = after == segments_.begin() ? 0 : static_cast<size_t>(after - segments_.begin()) - 1;
    // The first segment also holds the ticks before it, the last those after.
    hint_first_ = hint_ == 0 ? 0 : segments_[hint_].tsc;
    hint_end_ = hint_ + 1 == segments_.size() ? UINT64_MAX : segments_[hint_ + 1].tsc;
  }
  return at(segments_[hint_], tsc);
}

}  // namespace memtrack
