#include "record/intake/tsc_clock.h"

#include <x86intrin.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "util/monotonic_clock.h"

namespace memtrack {

namespace {

// A reading's error is corrected over the next this many ns of the clock.
constexpr double kSteerNs = 10e6;
// Readings closer than this to the last segment's start only measure.
constexpr uint64_t kMinSegmentNs = 1000000;
// Segments kept: ticks older than the oldest are converted on its line.
constexpr size_t kMaxSegments = 4096;
// Readings kept to measure the rate: one per kBaselineNs.
constexpr uint64_t kBaselineNs = 100000000;
constexpr size_t kBaselines = 10;
// Conversion behind the clock by more than this (a step of the TSC against
// the clock): the next segment starts at the clock's time.
constexpr int64_t kStepNs = 1000000;

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

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
  std::ifstream cpuinfo("/proc/cpuinfo");
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
  const std::string source = first_line("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  if (source != "tsc" && source != "kvm-clock" && source != "hyperv_clocksource_tsc_page") {
    *why = "the kernel's clock is not built on the TSC (clocksource " + (source.empty() ? "unknown" : source) + ")";
    return false;
  }
  return true;
}

uint64_t TscClock::ticks() {
  // After every earlier load: a tick read here follows the events it drains.
  _mm_lfence();
  return __rdtsc();
}

TscClock::Reading TscClock::read_now() {
  // The clock's time between two ticks: the reading is as precise as that
  // bracket (~60 ticks), unless the thread was interrupted inside it: the
  // narrowest of a few.
  Reading best{};
  uint64_t narrowest = UINT64_MAX;
  for (int attempt = 0; attempt < 4; ++attempt) {
    uint64_t before = ticks();
    uint64_t ns = monotonic_ns();
    uint64_t after = ticks();
    if (after - before < narrowest) {
      narrowest = after - before;
      best = {before + (after - before) / 2, ns};
    }
    if (narrowest < 1000) break;
  }
  return best;
}

TscClock::TscClock() : TscClock(read_now()) {}

TscClock::TscClock(Reading first) : baselines_{first} {}

void TscClock::take_reading() { take_reading(read_now()); }

uint64_t TscClock::at(const Segment& s, uint64_t tsc) {
  // Multiplying by a positive constant keeps the order of the ticks.
  if (tsc >= s.tsc) {
    double later = static_cast<double>(tsc - s.tsc) * s.ns_per_tick;
    return later >= static_cast<double>(UINT64_MAX - s.ns) ? UINT64_MAX : s.ns + static_cast<uint64_t>(later);
  }
  double earlier = static_cast<double>(s.tsc - tsc) * s.ns_per_tick;
  return earlier >= static_cast<double>(s.ns) ? 0 : s.ns - static_cast<uint64_t>(earlier);
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
    ++readings_;
    return;
  }
  const Segment& last = segments_.back();
  if (r.tsc <= last.tsc) return;
  ++readings_;
  const uint64_t converted = at(last, r.tsc);
  const int64_t error = static_cast<int64_t>(converted - r.ns);
  max_error_ns_ = std::max<uint64_t>(max_error_ns_, static_cast<uint64_t>(error < 0 ? -error : error));
  if (error < -kStepNs) {
    // Far behind: catch up at once (forward, so nothing converted moves).
    segments_.push_back({r.tsc, r.ns, rate});
  } else {
    if (static_cast<double>(r.tsc - last.tsc) * last.ns_per_tick < kMinSegmentNs && error <= 0) return;
    // Ahead or behind: a rate that meets the clock kSteerNs from now, but
    // never below half or above twice the clock's (ahead: slowed, never sent
    // back).
    const double steered = std::clamp(rate * (1.0 - static_cast<double>(error) / kSteerNs), rate / 2, rate * 2);
    segments_.push_back({r.tsc, converted, steered});
  }
  if (segments_.size() > kMaxSegments) segments_.pop_front();
}

uint64_t TscClock::to_ns(uint64_t tsc) const {
  if (segments_.empty()) return at({baselines_.front().tsc, baselines_.front().ns, 1.0}, tsc);  // no rate yet
  size_t i = segments_.size() - 1;
  while (i > 0 && segments_[i].tsc > tsc) --i;
  return at(segments_[i], tsc);
}

}  // namespace memtrack
