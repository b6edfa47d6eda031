// The one replay of the heap: every allocation and free of an artifact, in
// file (time) order, applied to a single store of live blocks from which the
// per-process, per-thread and per-site figures all come.
//
// Ownership and the rules (the contract every figure of the report rests on):
// - The replay owns one record per call site (SiteId, dense, 0: no call
//   path), created on first use and never moved out: its SiteCosts and its
//   live state. The caller hands the SiteId of each allocation (ProfileBuilder
//   maps stack hashes to them); the replay knows nothing of stacks.
// - The replay owns every process incarnation (a pid from its Fork record, or
//   its first record, to its Exit record, or to a Fork reusing the pid), in
//   order of birth. An incarnation owns its live blocks, keyed by address.
// - A live block points at its site's record (by SiteId: an index, since the
//   records grow) and carries its allocating thread. Every change to a block
//   (allocate, free, realloc, replace, leak) updates the process's and the
//   site's figures in the same step, so the views cannot drift apart.
// - A realloc frees its old block unless it failed (NULL for a non-zero
//   size: the old block stays as it was); realloc(p, 0) returning NULL freed
//   it. An allocation at an address still live replaces that block (its Free
//   record was lost). A failed allocation (address 0) is counted, not stored.
// - Temporary: a block freed before its allocating thread allocated again
//   (any allocation of the thread, failed or not, selected or not, ends it).
// - Exec and Exit end the address space: own blocks still live are leaked,
//   blocks inherited at fork are "inherited unfreed". At the end of the trace
//   (finish()) the own blocks of processes still running are "live at end",
//   not leaks (the process may free them later); inherited ones are
//   inherited unfreed as before.
// - A recording attached to running processes cannot see what they
//   allocated before: a free of a block it never saw allocated, in an
//   address space that existed before the recording (a process found running,
//   or forked from one, until its next exec), is a "free of an earlier
//   block", not an unmatched free.
// - A Fork gives the child a copy of the parent's live blocks, marked
//   inherited: the child may free them (not an unmatched free), but they are
//   the parent's allocations, so they never count for a site, nor as a leak.
// - The filter (pid, tid, time window) selects which allocations count for
//   the sites; a block it left out is invisible to them (its free too).
//   Per-process figures count every allocation.
// - Per-site peak: what each site had live (selected, own blocks) when the
//   selected live bytes of all processes were highest (first reached), so the
//   sites' peak figures add up to that peak. With a moment (`report --at T`)
//   the same figures hold what each site had live at T instead: the state
//   after every record up to the first one later than T (blocks of processes
//   still running at the end stay live after it).
// Memory is proportional to live blocks, threads and sites, never to events.
// Not thread-safe: one thread feeds it.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "analyze/live_block_table.h"
#include "analyze/profile.h"
#include "analyze/report.h"
#include "format/artifact.h"
#include "format/event.h"

namespace memtrack {

// A call site of the replay: dense, 0 for allocations without a call path.
using SiteId = uint32_t;

// Which allocations count for the sites. Frees of a selected block always
// count; a block the filter left out is invisible (its free too).
struct EventFilter {
  std::vector<int32_t> pids;  // empty: every process
  std::vector<int32_t> tids;  // empty: every thread
  // Allocation time window, ns since the recording start.
  std::optional<uint64_t> from_ns;
  std::optional<uint64_t> to_ns;

  bool selects(const Event& allocation, uint64_t start_monotonic_ns) const;
};

class HeapReplay {
 public:
  // `live_at_ns` (ns since the recording start): the sites' peak figures are
  // what each site had live at that moment instead of at the peak.
  // `attached`: the recording attached to running processes
  // (recording_attached(header)).
  explicit HeapReplay(EventFilter filter = {}, uint64_t start_monotonic_ns = 0,
                      std::optional<uint64_t> live_at_ns = std::nullopt, bool attached = false);
  // Movable, not copyable: the running-process index points into the
  // incarnations, which a move keeps in place and a copy would not.
  HeapReplay(const HeapReplay&) = delete;
  HeapReplay& operator=(const HeapReplay&) = delete;
  HeapReplay(HeapReplay&&) = default;
  HeapReplay& operator=(HeapReplay&&) = default;

  // Every record in file order; Mapping and Stack records are ignored.
  // `site` is the allocation's call site (ignored for other records).
  void on_event(const Event& event, SiteId site = 0);
  // The trace ended: blocks of processes still running are live at end.
  // Call once, after the last event and before the results below.
  void finish();

  // Per-process figures and their totals. reader_warnings are carried into
  // the report; a missing trailer adds one.
  Report build_report(const ArtifactHeader& header, const std::optional<ArtifactTrailer>& trailer,
                      std::vector<std::string> reader_warnings) const;
  // Per SiteId (an id never used has zero costs).
  // Takes the leaks of the runtime's sites and of the suppressed ones out of
  // `report`'s leaked figures (built by build_report from this replay, in
  // the same order), into runtime_held_* and suppressed_leaked_*.
  void exclude_leaks(Report& report, const std::vector<SiteId>& runtime_sites,
                     const std::vector<SiteId>& suppressed_sites) const;
  const std::vector<SiteCosts>& site_costs() const { return site_costs_; }
  // When the sites' peak was first reached, ns since the recording start; 0
  // when nothing selected was ever live. With a moment: the moment.
  uint64_t site_peak_time_ns() const;

  // A finished replay's results without its live blocks: what an aggregated
  // recording keeps instead of its events (analyze/heap_aggregate.h).
  struct SiteTally {
    SiteId site = 0;
    uint64_t bytes = 0;
    uint64_t count = 0;
  };
  struct ProcessSummary {
    int32_t pid = 0;
    std::optional<int32_t> parent_pid;
    std::string command;
    std::string exe;
    uint64_t birth_ns = 0;
    uint64_t last_event_ns = 0;
    std::optional<int32_t> exit_code;
    bool ended = false;
    bool image_interposed = false;
    uint8_t earlier_images_recorded_by = 0;
    HeapFigures figures;  // peak_time_ns absolute, as the replay keeps it
    std::vector<SiteTally> leaked_by_site;
  };
  struct Summary {
    uint64_t events = 0;
    uint64_t last_event_ns = 0;
    uint64_t total_peak_bytes = 0;
    uint64_t total_peak_ns = 0;
    uint64_t site_peak_bytes = 0;
    uint64_t site_peak_ns = 0;
    std::vector<SiteCosts> site_costs;  // by SiteId
    std::vector<ProcessSummary> processes;
  };
  // After finish().
  Summary summary() const;
  // What finish() then summary() would give now, the replay left as it is:
  // the blocks of the running processes count as live at the end (record
  // --aggregate's checkpoints, taken while recording goes on).
  Summary summary_if_ended_now() const;
  // A finished replay whose results are the summary's, site s renamed
  // site_map[s] (sites renamed alike add up: their peak figures are at the
  // same moment). Without live blocks: nothing may be added to it.
  static HeapReplay from_summary(const Summary& summary, const std::vector<SiteId>& site_map,
                                 uint64_t start_monotonic_ns, bool attached);

  // Blocks currently live in all running processes, and their bytes.
  size_t live_blocks() const;
  uint64_t live_bytes() const { return total_live_bytes_; }
  // Live bytes (own and inherited, selected or not) of the running process
  // `pid`, 0 when none runs: the timeline's heap series (analyze/timeline.h).
  uint64_t live_bytes_of(int32_t pid) const;

 private:
  struct LiveBlock {
    uint64_t size = 0;
    SiteId site = 0;
    int32_t allocating_tid = 0;
    bool inherited = false;  // a copy made at fork: the parent's allocation
    bool selected = false;   // counts for its site (the filter chose it)
  };
  struct Tally {
    uint64_t bytes = 0;
    uint64_t count = 0;
  };
  struct Process {
    Process(int32_t pid, uint64_t birth_ns) : pid(pid), birth_ns(birth_ns), last_event_ns(birth_ns) {}
    int32_t pid;
    std::optional<int32_t> parent_pid;
    std::string command;
    std::string exe;
    uint64_t birth_ns;
    uint64_t last_event_ns;
    std::optional<int32_t> exit_code;
    bool ended = false;
    // The address space existed before the recording (attached to it): it
    // holds blocks the recording never saw allocated.
    bool holds_earlier_blocks = false;
    // The current image's way of recording (an Interposed record, or the
    // parent's at fork), whether it allocated or freed, and the ways of the
    // earlier images that did (RecordedBy bits).
    bool image_interposed = false;
    bool image_used_allocator = false;
    uint8_t earlier_images_recorded_by = 0;
    LiveBlockTable<LiveBlock> blocks;
    Tally own_live;
    Tally inherited_live;
    // Per thread, the address of its latest allocation (0 once freed or
    // failed): a Free of it is a temporary allocation. Its keys are the
    // incarnation's threads.
    std::unordered_map<int32_t, uint64_t> last_allocation_by_tid;
    HeapFigures figures;  // peak_time_ns absolute here; duration_ns set in the report
    // Own blocks leaked, by site (exclude_leaks takes some out of figures).
    absl::flat_hash_map<SiteId, Tally> leaked_by_site;

    uint64_t live_bytes() const { return own_live.bytes + inherited_live.bytes; }
  };
  // What one site had live, and its value at the latest sites' peak: a site
  // last changed before the peak still holds it in bytes/count; its first
  // change after the peak saves it in at_peak_* (so a new peak costs O(1),
  // not a walk over every site).
  struct SiteLive {
    uint64_t bytes = 0;
    uint64_t count = 0;
    uint64_t at_peak_bytes = 0;
    uint64_t at_peak_count = 0;
    uint64_t changed = 0;  // sequence number of the last change
  };

  Process* find_running(int32_t pid);
  // A new incarnation of pid; a running one is closed first (pid reuse
  // whose Exit record is missing).
  Process& start_process(int32_t pid, uint64_t birth_ns);
  void fork_from(Process& child, const Process* parent);
  void allocate(Process& process, const Event& event, SiteId site);
  void release(Process& process, const Event& event);
  // A free of a block that is not live: unmatched, or an earlier block's.
  static void count_unseen_free(Process& process);
  // Removes the block at addr from both views; nullopt when not live.
  std::optional<LiveBlock> take_block(Process& process, uint64_t addr);
  // Takes a block out of the live figures (not out of `blocks`).
  void forget_block(Process& process, const LiveBlock& block);
  // The address space is gone (exec, exit): its live blocks are leaks; or
  // the recording ended first (`ended` false): they are live at end.
  void discard_address_space(Process& process, bool ended = true);
  void close(Process& process);
  static void set_image(Process& process, const ProcessImage& image);
  static ProcessReport to_report(const Process& process, uint64_t start_monotonic_ns);

  SiteCosts& costs_of(SiteId site);
  // Before a change to the live state of `site`.
  SiteLive& touch(SiteId site);
  void after_site_change();

  EventFilter filter_;
  uint64_t start_ns_;
  bool attached_;
  std::deque<Process> processes_;  // every incarnation, in order of birth; stable addresses
  std::unordered_map<int32_t, Process*> running_;
  uint64_t events_ = 0;
  uint64_t last_event_ns_ = 0;
  uint64_t now_ = 0;
  // All processes: live bytes (own and inherited) and their peak.
  uint64_t total_live_bytes_ = 0;
  uint64_t total_peak_bytes_ = 0;
  uint64_t total_peak_ns_ = 0;
  // Sites, indexed by SiteId: costs and live state; selected live bytes and their peak.
  std::vector<SiteCosts> site_costs_;
  std::vector<SiteLive> site_live_;
  uint64_t site_live_bytes_ = 0;
  uint64_t site_peak_bytes_ = 0;
  uint64_t site_peak_sequence_ = 0;  // the change that reached the peak
  uint64_t site_peak_ns_ = 0;
  uint64_t sequence_ = 0;
  std::optional<uint64_t> live_at_ns_;
  bool past_moment_ = false;  // a record later than live_at_ns_ was seen
  bool finished_ = false;
};

}  // namespace memtrack
