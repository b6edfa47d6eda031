// The heap of one process incarnation while a trace is streamed: its live
// blocks, per-thread state for temporary allocations, and running figures.
// Memory is proportional to its live blocks and threads, not to its events.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include <absl/container/flat_hash_map.h>

#include "analyze/report.h"
#include "format/event.h"

namespace memtrack {

class ProcessHeap {
 public:
  ProcessHeap(int32_t pid, uint64_t birth_ns);

  // At a Fork record: the child starts with a copy of the parent's live
  // blocks (marked inherited) and its command. parent is null when the
  // parent was not traced.
  void fork_from(int32_t parent_pid, const ProcessHeap* parent);
  // Every record of this process, its Fork record included.
  void on_event(const Event& event);
  // Ends this incarnation at its last record: its live blocks are counted as
  // leaked (own) or unfreed (inherited).
  // Called at its Exit record, and by the analyzer when the pid reappears in
  // a Fork record without an Exit record.
  void close();

  bool ended() const { return ended_; }
  uint64_t live_bytes() const { return own_live_.bytes + inherited_live_.bytes; }
  size_t live_blocks() const { return live_.size(); }

  ProcessReport to_report(uint64_t start_monotonic_ns) const;

 private:
  struct LiveBlock {
    uint64_t size = 0;
    int32_t allocating_tid = 0;
    bool inherited = false;
  };
  struct Tally {
    uint64_t bytes = 0;
    uint64_t count = 0;
  };

  void allocate(const Event& event);
  void release(const Event& event);
  // Removes and returns the block at addr, if live.
  std::optional<LiveBlock> take_block(uint64_t addr);
  // The address space is gone (exec, exit): its live blocks become leaks.
  void discard_address_space();
  void set_image(const ProcessImage& image);

  int32_t pid_;
  std::optional<int32_t> parent_pid_;
  std::string command_;
  std::string exe_;
  uint64_t birth_ns_;
  uint64_t last_event_ns_;
  std::optional<int32_t> exit_code_;
  bool ended_ = false;

  // Open addressing: one cache miss per lookup, the report's hottest path.
  absl::flat_hash_map<uint64_t, LiveBlock> live_;
  Tally own_live_;
  Tally inherited_live_;
  // Per thread, the address of its latest allocation (0 after it was freed or
  // when the allocation failed): a Free of it is a temporary allocation.
  std::unordered_map<int32_t, uint64_t> last_allocation_by_tid_;

  // peak_time_ns is absolute here; duration_ns is filled in by to_report.
  HeapFigures figures_;
};

}  // namespace memtrack
