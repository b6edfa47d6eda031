// Puts the recorder's events in time order before they are written: records
// of different CPUs, rings and interposer chunks interleave slightly, and a
// batch is handed out only up to a watermark, past which a record may still
// be on its way. Events with the same timestamp keep the order they were
// added in (a Fork before its process's first event, a Stack before the
// events that refer to it). Poller thread only.
//
// An interposer chunk's events come in time order already: each is kept as a
// run, and the runs are merged (the loose events of the rings, sorted, are a
// run too), so an event is moved once, never sorted with the others.
#pragma once

#include <cstdint>
#include <vector>

#include "format/event.h"

namespace memtrack {

class EventOrder {
 public:
  // An event in no particular order relative to the others.
  void add(Event&& event);
  // Events in time order (an interposer chunk's), added after the others; a
  // run that is not in order is sorted.
  void add_run(std::vector<Event>&& run);
  // An empty vector for the next run, with the storage of a finished one.
  std::vector<Event> spare_run();
  // Moves every event stamped at or before `watermark` (all of them when
  // `everything`) to the end of `batch`, in time order; keeps the rest.
  void take(uint64_t watermark, bool everything, std::vector<Event>& batch);
  bool empty() const { return runs_.empty() && loose_.empty(); }

 private:
  struct Run {
    std::vector<Event> events;
    size_t next = 0;  // events before it were taken
  };
  // The loose events added since the last run become a run of their own.
  void close_loose();

  std::vector<Run> runs_;  // in the order added: the earlier wins a tie
  std::vector<Event> loose_;
  std::vector<std::vector<Event>> spares_;
  std::vector<size_t> heap_;  // runs_ indexes, by their next event
};

}  // namespace memtrack
