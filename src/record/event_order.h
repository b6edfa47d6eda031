// Puts the recorder's events in time order before they are written: records
// of different CPUs, rings and interposer chunks interleave slightly, and a
// batch is handed out only up to a watermark, past which a record may still
// be on its way. Events with the same timestamp keep the order they were
// added in (a Fork before its process's first event, a Stack before the
// events that refer to it). Poller thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "format/event.h"

namespace memtrack {

class EventOrder {
 public:
  // An event in no particular order relative to the others.
  void add(Event&& event);
  // Events in time order (an interposer chunk's), added after the others.
  void add_run(std::vector<Event>&& run);
  // Moves every event stamped at or before `watermark` (all of them when
  // `everything`) to the end of `batch`, in time order; keeps the rest.
  void take(uint64_t watermark, bool everything, std::vector<Event>& batch);
  bool empty() const { return pending_.empty(); }

 private:
  std::vector<Event> pending_;  // sorted by timestamp up to sorted_
  size_t sorted_ = 0;
};

}  // namespace memtrack
