// `record --aggregate`: the analysis's heap replay and timeline run while
// recording, and the artifact keeps their results instead of every
// allocation, so that it grows with call paths, processes and time buckets,
// not with events (memray's "aggregated" mode, with every figure kept).
//
//   recorder ──records──▶ ArtifactWriter ──Stack, Mapping, Fork, Exec, Exit...──▶ frames
//                              │ every record (EventAggregator::add)
//                              ▼
//                        HeapAggregator: HeapReplay + TimelineBuilder, sites by
//                              │         (stack hash, pid, tid)
//                              ▼ at finish (EventAggregator::state)
//                        Aggregate records ──▶ analyze_recording: restore_aggregate
//                                               (sites renamed to the profile's)
//
// Rules (what makes every report of an aggregated recording the one of the
// same recording kept whole):
// - The aggregator feeds the replay and the timeline exactly what the
//   analysis feeds them: every record but Mapping and Stack records, in order,
//   with no filter, no moment and the timeline's options of a report
//   (site slices kept, for the HTML page).
// - Its sites are finer than any report's: one per (stack hash, pid, tid), in
//   order of first allocation. The analysis renames each to its own site for
//   that hash, process and thread (StackSites), in that order, so its sites
//   are numbered as a whole recording's would be; sites renamed alike add up.
// - The state is a MessagePack array led by its version (docs/FORMAT.md
//   §2.9); a reader refuses a version or a shape it does not know, naming
//   what is wrong, and never crashes on it.
// - What needs the events themselves is not offered: a report's filters
//   (--pid, --tid, --from, --to) and its moment (--at), and `dump`'s events.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "analyze/heap_replay.h"
#include "analyze/timeline.h"
#include "format/artifact.h"

namespace memtrack {

// An aggregator's site: allocations with this stack hash made by this process
// and thread.
struct AggregateSite {
  uint64_t stack_hash = 0;
  int32_t pid = 0;
  int32_t tid = 0;
  bool operator==(const AggregateSite&) const = default;
  template <typename H>
  friend H AbslHashValue(H state, const AggregateSite& site) {
    return H::combine(std::move(state), site.stack_hash, site.pid, site.tid);
  }
};

class HeapAggregator final : public EventAggregator {
 public:
  // `attached`: the recording attaches to running processes (recording_attached).
  HeapAggregator(uint64_t start_monotonic_ns, bool attached);
  void add(const Event& event) override;
  std::vector<uint8_t> state() const override;
  uint64_t live_bytes() const override { return replay_.live_bytes(); }

 private:
  SiteId site_of(const Event& allocation);

  HeapReplay replay_;
  TimelineBuilder timeline_;
  absl::flat_hash_map<AggregateSite, SiteId> site_ids_;
  std::vector<AggregateSite> sites_;  // by SiteId - 1 (SiteId 0 is never handed out)
};

// The analysis's site of an allocation with this stack hash, made by this
// process and thread (ProfileBuilder::allocation_site).
using AllocationSite = std::function<SiteId(uint64_t stack_hash, int32_t pid, int32_t tid)>;

struct AggregatedFigures {
  HeapReplay replay;  // finished
  Timeline timeline;
};

// The figures of an aggregated artifact's state (its Aggregate records'
// parts, joined), their sites renamed by `site_of`; the recording started at
// `start_monotonic_ns` (its header's). Throws std::runtime_error naming what
// is malformed.
AggregatedFigures restore_aggregate(std::span<const uint8_t> state, const AllocationSite& site_of,
                                    uint64_t start_monotonic_ns, bool attached);

}  // namespace memtrack
