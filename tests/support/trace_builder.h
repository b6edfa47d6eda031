// Builds synthetic event sequences for the analyzer tests. Every event gets
// the next timestamp of a clock advancing by kStepNs, starting kStepNs after
// the header's start, so expected times are easy to state.
#pragma once

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "analyze/heap_replay.h"
#include "format/artifact.h"
#include "format/event.h"

namespace memtrack::testing {

class TraceBuilder {
 public:
  static constexpr uint64_t kStartNs = 5'000'000'000;
  static constexpr uint64_t kStepNs = 1'000;

  TraceBuilder& malloc(int32_t pid, int32_t tid, uint64_t addr, uint64_t size) {
    return allocation(EventType::Malloc, pid, tid, addr, size);
  }
  TraceBuilder& calloc(int32_t pid, int32_t tid, uint64_t addr, uint64_t size) {
    return allocation(EventType::Calloc, pid, tid, addr, size);
  }
  TraceBuilder& aligned_alloc(int32_t pid, int32_t tid, uint64_t addr, uint64_t size) {
    return allocation(EventType::AlignedAlloc, pid, tid, addr, size);
  }
  TraceBuilder& realloc(int32_t pid, int32_t tid, uint64_t old_addr, uint64_t addr,
                        uint64_t size) {
    Event& event = add(EventType::Realloc, pid, tid);
    event.old_addr = old_addr;
    event.addr = addr;
    event.size = size;
    return *this;
  }
  TraceBuilder& free(int32_t pid, int32_t tid, uint64_t addr) {
    add(EventType::Free, pid, tid).addr = addr;
    return *this;
  }
  TraceBuilder& fork(int32_t parent_pid, int32_t child_pid) {
    add(EventType::Fork, child_pid, child_pid).parent_pid = parent_pid;
    return *this;
  }
  TraceBuilder& exec(int32_t pid, std::vector<std::string> argv, std::string path = "",
                     std::string comm = "") {
    add(EventType::Exec, pid, pid).image = std::make_shared<const ProcessImage>(
        ProcessImage{std::move(path), std::move(comm), std::move(argv)});
    return *this;
  }
  // The recorder attaching (record --pid) introduces each process it finds
  // running by an Exec read from /proc, after a Fork at the same moment for
  // a child (record/recorder.cpp); makes the recording an attached one.
  TraceBuilder& introduce(int32_t pid, std::optional<int32_t> parent_pid = std::nullopt) {
    attached_ = true;
    if (parent_pid) fork(*parent_pid, pid);
    uint64_t moment = events_.empty() ? kStartNs + kStepNs : events_.back().timestamp;
    exec(pid, {"./service"});
    if (parent_pid) events_.back().timestamp = moment;
    return *this;
  }
  TraceBuilder& interposed(int32_t pid) {
    add(EventType::Interposed, pid, pid);
    return *this;
  }
  TraceBuilder& exit(int32_t pid, int32_t wait_status) {
    add(EventType::Exit, pid, pid).exit_code = wait_status;
    return *this;
  }

  // Gives the latest event the call path `hash`.
  TraceBuilder& stack(uint64_t hash) {
    events_.back().stack_hash = hash;
    return *this;
  }

  // ns since the header's start of the latest event.
  uint64_t last_offset_ns() const { return events_.size() * kStepNs; }
  const std::vector<Event>& events() const { return events_; }

  static ArtifactHeader header() {
    ArtifactHeader header;
    header.command = {"./app", "--serve"};
    header.host = "testhost";
    header.kernel = "6.1.0-test";
    header.recorder_version = "0.1.0";
    header.start_monotonic_ns = kStartNs;
    header.start_realtime_ns = 1'700'000'000'000'000'000;
    return header;
  }

  // Analyses every event; by default the recording was finalized without losses.
  Report report(std::optional<ArtifactTrailer> trailer = ArtifactTrailer{},
                std::vector<std::string> reader_warnings = {}) const {
    return replay().build_report(recording_header(), trailer, std::move(reader_warnings));
  }
  // The finished replay of every event; an allocation's site is its stack
  // hash (tests keep them small).
  // With `live_at_ns`, the sites' peak figures are those live at that moment.
  HeapReplay replay(EventFilter filter = {}, std::optional<uint64_t> live_at_ns = std::nullopt) const {
    HeapReplay replay(std::move(filter), kStartNs, live_at_ns, recording_attached(recording_header()));
    for (const Event& event : events_) replay.on_event(event, static_cast<SiteId>(event.stack_hash));
    replay.finish();
    return replay;
  }

 private:
  // header(), with the feature "attached" after introduce().
  ArtifactHeader recording_header() const {
    ArtifactHeader h = header();
    if (attached_) h.features = {"attached"};
    return h;
  }
  TraceBuilder& allocation(EventType type, int32_t pid, int32_t tid, uint64_t addr,
                           uint64_t size) {
    Event& event = add(type, pid, tid);
    event.addr = addr;
    event.size = size;
    return *this;
  }
  Event& add(EventType type, int32_t pid, int32_t tid) {
    Event& event = events_.emplace_back();
    event.type = type;
    event.pid = pid;
    event.tid = tid;
    event.timestamp = kStartNs + events_.size() * kStepNs;
    return event;
  }

  std::vector<Event> events_;
  bool attached_ = false;
};

// A copy of the report's process with this pid (its first incarnation), so
// that it may be taken from a temporary report; throws if absent.
inline ProcessReport process_of(const Report& report, int32_t pid) {
  for (const ProcessReport& process : report.processes) {
    if (process.pid == pid) return process;
  }
  throw std::runtime_error("no process " + std::to_string(pid) + " in the report");
}

}  // namespace memtrack::testing
