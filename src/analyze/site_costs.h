// Costs per call path (a site key: the stack hash, or the caller's own key
// for it), streamed: allocations, bytes, the bytes
// live at the heap's peak, leaks and temporaries, over the allocations a
// filter selects. Memory is proportional to live blocks, threads and
// distinct stacks, never to the number of events.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>

#include <absl/container/flat_hash_map.h>
#include <vector>

#include "analyze/profile.h"
#include "format/event.h"

namespace memtrack {

// Which allocations count. Frees of a selected block always count; a block
// the filter left out is invisible (its free too).
struct EventFilter {
  std::vector<int32_t> pids;  // empty: every process
  std::vector<int32_t> tids;  // empty: every thread
  // Allocation time window, ns since the recording start.
  std::optional<uint64_t> from_ns;
  std::optional<uint64_t> to_ns;

  bool selects(const Event& allocation, uint64_t start_monotonic_ns) const;
};

class SiteCostTracker {
 public:
  SiteCostTracker(EventFilter filter, uint64_t start_monotonic_ns);

  // Allocation, Free, Fork, Exec and Exit records in file order; others are
  // ignored. An allocation counts for `site` (0: no call path).
  void on_event(const Event& event, uint64_t site);
  // Allocations count for their stack_hash.
  void on_event(const Event& event) { on_event(event, event.stack_hash); }
  // The trace ended: blocks still live are leaked. Call once, last.
  void finish();

  // Per site key (0: allocations without a stack).
  const absl::flat_hash_map<uint64_t, SiteCosts>& costs() const { return costs_; }
  uint64_t peak_bytes() const { return peak_bytes_; }
  // When the peak was first reached, ns since the recording start; 0 when
  // nothing was ever live.
  uint64_t peak_time_ns() const;

 private:
  struct Block {
    uint64_t size = 0;
    uint64_t site = 0;
    int32_t tid = 0;
  };
  // The live state of one stack, and its value at the latest peak: a stack
  // last changed before the peak still holds it in `live`; the first change
  // after the peak saves it in `at_peak` (so a new peak costs O(1), not a
  // walk over every stack).
  struct Live {
    uint64_t bytes = 0;
    uint64_t count = 0;
    uint64_t at_peak_bytes = 0;
    uint64_t at_peak_count = 0;
    uint64_t changed = 0;  // sequence number of the last change
  };

  struct Process {
    absl::flat_hash_map<uint64_t, Block> blocks;  // live selected blocks
    // Per thread, its latest allocation (0 once freed or failed): a Free of
    // it is a temporary allocation.
    absl::flat_hash_map<int32_t, uint64_t> last_allocation_by_tid;
  };

  void allocate(const Event& event, uint64_t site);
  void release(Process& process, uint64_t addr, bool count_temporary);
  // The address space is gone: its live blocks are leaks. At exit (or a
  // pid seen again without its Exit) the process is forgotten.
  void leak_all(int32_t pid, bool forget);
  // Before a change to `stack`'s live state.
  Live& touch(uint64_t stack);
  void after_change();

  EventFilter filter_;
  uint64_t start_ns_;
  std::unordered_map<int32_t, Process> processes_;
  absl::flat_hash_map<uint64_t, SiteCosts> costs_;
  absl::flat_hash_map<uint64_t, Live> live_;
  uint64_t live_bytes_ = 0;
  uint64_t peak_bytes_ = 0;
  uint64_t peak_sequence_ = 0;  // the change that reached the peak
  uint64_t peak_timestamp_ = 0;
  uint64_t sequence_ = 0;
  uint64_t now_ = 0;
  bool finished_ = false;
};

}  // namespace memtrack
