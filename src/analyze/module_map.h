// Which file each process had mapped where, and when: Mapping records
// replayed with the process tree into placements with time ranges, so an
// address seen at time t in process p resolves to the file mapped there then.
//
// Feed Mapping, Fork, Exec and Exit events in file (time) order; other
// events are ignored. The rules:
// - A Mapping opens a placement [addr, addr + len) from its timestamp.
//   A Mapping identical to a live placement of the pid (same range, file
//   offset, path and identity) is the same mapping seen again (a later
//   /proc snapshot) and changes nothing.
// - MMAP2 has no unmap record: a Mapping ends every live placement of its
//   pid whose range it overlaps (the kernel replaced those pages), even
//   partly. A placement unmapped and never overmapped by code (dlclose, then
//   nothing executable there) stays open; a lookup of an address in it after
//   the unmap can only come from a stale pointer.
// - A Mapping with new_image ends every live placement of its pid: the exec
//   replaced the address space. The Exec record of that exec, which comes
//   after the new image's first mappings, then changes nothing.
// - Otherwise an Exec ends the pid's live placements (/proc snapshots of
//   the new image follow it).
// - A Fork gives the child a copy of the parent's live placements from the
//   fork's timestamp: inherited mappings are not reported again.
// - An Exit ends the pid's live placements.
// A dlclose'd library mapped again, here or elsewhere, keeps both
// placements; a pid reused by a new process keeps the old one's, ended.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "format/event.h"

namespace memtrack {

struct Placement {
  static constexpr uint64_t kOpen = std::numeric_limits<uint64_t>::max();

  uint64_t start = 0;  // [start, end)
  uint64_t end = 0;
  uint64_t from_ns = 0;    // mapped, inherited at fork, or seen in a snapshot
  uint64_t to_ns = kOpen;  // overmapped, exec or exit; kOpen while live
  // Path, file offset of `start`, identity (build id or dev/ino), prot;
  // shared with the Mapping event and with inherited copies.
  std::shared_ptr<const MappingInfo> mapping;

  bool live_at(uint64_t timestamp) const { return from_ns <= timestamp && timestamp < to_ns; }
  bool contains(uint64_t address) const { return start <= address && address < end; }
};

class ModuleMap {
 public:
  void on_event(const Event& event);

  // The placement of `pid` covering `address` at `timestamp`, or nullptr.
  // Valid until the next on_event().
  const Placement* placement_at(int32_t pid, uint64_t address, uint64_t timestamp) const;
  // Whether `pid`'s placements have not changed since `timestamp`: the
  // answers of placement_at at that time are those of any later time, until
  // the next on_event() of the pid.
  bool unchanged_since(int32_t pid, uint64_t timestamp) const {
    auto found = processes_.find(pid);
    return found != processes_.end() && timestamp >= found->second.changed_ns;
  }
  // Every placement `pid` has had, in the order they began.
  std::span<const Placement> placements(int32_t pid) const;
  // Drops everything known of `pid` (a consumer that no longer needs the
  // placements of an exited process, so memory does not grow with the
  // processes of a long trace).
  void forget(int32_t pid) { processes_.erase(pid); }

 private:
  struct Process {
    std::vector<Placement> placements;
    std::map<uint64_t, size_t> live;  // start -> index in placements; disjoint ranges
    // Time of the last change to `live`: the live set answers any later time.
    uint64_t changed_ns = 0;
    bool image_replaced = false;  // a new_image Mapping came since the last Exec/Fork
  };

  void add_mapping(Process& process, const Event& event);
  static void end_all(Process& process, uint64_t timestamp);
  // Ends one live placement; returns the next live one.
  static std::map<uint64_t, size_t>::iterator end(Process& process, std::map<uint64_t, size_t>::iterator live,
                                                  uint64_t timestamp);

  std::unordered_map<int32_t, Process> processes_;
};

}  // namespace memtrack
