// What ProfileBuilder keeps for records that come late: a Stack record a
// little after its process's Exit (the recorder orders records within a
// margin), and Module records (record --embed-modules), which come last in an
// artifact, after the raw copies that need their CFI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include "format/event.h"

namespace memtrack {

// Exited processes whose placements may be dropped once the trace is
// kForgetAfterNs past their exit. Owns only pids and times.
class ExitedProcesses {
 public:
  static constexpr uint64_t kForgetAfterNs = 1'000'000'000;

  void on_exit(int32_t pid, uint64_t timestamp) {
    exits_.emplace_back(timestamp, pid);
    latest_exit_[pid] = timestamp;
  }
  // The pid is used again (a Fork record): its placements stay.
  void on_reuse(int32_t pid) { latest_exit_.erase(pid); }
  // The pids exited more than kForgetAfterNs before `timestamp` and not used
  // again since; each is returned once.
  template <typename Forget>
  void expire(uint64_t timestamp, Forget&& forget) {
    while (!exits_.empty() && exits_.front().first + kForgetAfterNs < timestamp) {
      auto [exit_ns, pid] = exits_.front();
      exits_.pop_front();
      auto latest = latest_exit_.find(pid);
      if (latest == latest_exit_.end() || latest->second != exit_ns) continue;  // used again since
      latest_exit_.erase(latest);
      forget(pid);
    }
  }

 private:
  std::deque<std::pair<uint64_t, int32_t>> exits_;       // (exit time, pid), in file order
  absl::flat_hash_map<int32_t, uint64_t> latest_exit_;  // while not forgotten
};

// Raw copies that stopped at a module whose file was missing, kept to be
// unwound again once every Module record was read. Owns copies of their
// Stack events, bounded by kMaxBytes of stack bytes: beyond it the first
// result stands (counted in skipped()).
class RawCopyRetries {
 public:
  static constexpr size_t kMaxBytes = 64 << 20;

  struct Pending {
    Event stack_event;
    uint32_t path;  // a CallPaths path of its own, replaced by the retry
  };

  // Room for this copy's bytes (reserved), or false, counted as skipped.
  bool admit(const Event& stack_event) {
    size_t bytes = stack_event.stack->bytes.size();
    if (bytes_ + bytes > kMaxBytes) {
      ++skipped_;
      return false;
    }
    bytes_ += bytes;
    return true;
  }
  // A copy admit() made room for, with its own path.
  void keep(const Event& stack_event, uint32_t path) {
    pending_.push_back({stack_event, path});
    pids_.insert(stack_event.pid);
  }
  // Their processes' placements must be kept after exit.
  bool holds(int32_t pid) const { return pids_.contains(pid); }
  // Hands the kept copies over, once.
  std::vector<Pending> take() {
    bytes_ = 0;
    return std::exchange(pending_, {});
  }
  uint64_t skipped() const { return skipped_; }

 private:
  std::vector<Pending> pending_;
  absl::flat_hash_set<int32_t> pids_;
  size_t bytes_ = 0;
  uint64_t skipped_ = 0;
};

}  // namespace memtrack
