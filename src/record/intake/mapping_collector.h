// Where each recorded process had which executable file mapped, and when:
// Mapping events for offline unwinding (src/analyze/module_map.h replays
// them into placements with time ranges).
//
// Two sources:
// - perf: one PERF_COUNT_SW_DUMMY event per online CPU on the root process,
//   inherited by every thread and process it creates, reporting
//   PERF_RECORD_MMAP2 for each executable mapping as it is made. Opened while
//   the root is stopped before its exec, so the exec's own mappings (the
//   executable and its interpreter) are seen. Mappings a process already had
//   when the events were opened are never reported, and a forked child's
//   inherited mappings are not reported again (ModuleMap copies them at Fork).
// - procfs: snapshots of /proc/PID/maps, taken by the recorder when it
//   introduces or stops a process (`--pid`, or when perf events are not
//   permitted). A snapshot sees only what is mapped at that instant.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format/event.h"

namespace memtrack {

// The CPUs of a kernel CPU list such as "0-3,5,8-9"
// (/sys/devices/system/cpu/online). Throws std::invalid_argument if malformed.
std::vector<int> parse_cpu_list(std::string_view list);

// What one record of the perf rings means to the collector.
struct PerfRecord {
  enum class Kind {
    Mapping,    // executable file mapping: `event` and `mapping`
    Exec,       // an exec replaced `pid`'s address space
    Other,      // not wanted: anonymous code, [vdso], FORK, EXIT, LOST...
    Malformed,  // too short for its type, no path terminator, bad build id
  };
  Kind kind = Kind::Other;
  uint64_t timestamp = 0;  // from the sample_id ending the record
  int32_t pid = 0;
  Event event;  // Mapping: complete but for event.mapping
  std::shared_ptr<MappingInfo> mapping;  // Mapping; new_image is set when emitted
};
// Decodes one record (header included) as the attributes the collector
// opens its events with lay it out.
PerfRecord decode_perf_record(std::span<const uint8_t> record);

class MappingCollector {
 public:
  enum class Source { Perf, ProcMaps };

  // Follows `root` and every thread and process it creates from now on with
  // perf events; open it while `root` is stopped before its exec. When the
  // kernel refuses (permissions, no perf support, memory-lock limit) the
  // collector uses /proc snapshots instead and fallback_reason() says why.
  explicit MappingCollector(pid_t root);
  // /proc snapshots only: for `--pid`, where perf events would miss what is
  // already mapped and every thread that already exists.
  MappingCollector();
  ~MappingCollector();
  MappingCollector(const MappingCollector&) = delete;
  MappingCollector& operator=(const MappingCollector&) = delete;

  Source source() const { return rings_.empty() ? Source::ProcMaps : Source::Perf; }
  // The artifact header feature naming the source: "mappings-perf" or
  // "mappings-procfs".
  std::string_view feature() const;
  // Why perf events are not used; empty when they are, or when /proc
  // snapshots were asked for.
  const std::string& fallback_reason() const { return fallback_reason_; }

  // The Mapping events of the perf records stamped up to `watermark_ns`, in
  // time order; later records are kept for a later call. Records of
  // different CPUs reach their rings slightly out of order, and an exec's
  // records must be taken in order for new_image to be right: take the
  // watermark (CLOCK_MONOTONIC) before calling, as the ring poller does, and
  // pass UINT64_MAX once the recording is over. Never blocks. Always empty
  // for the procfs source. Call from one thread at a time.
  std::vector<Event> drain(uint64_t watermark_ns);

  // The executable file mappings /proc/PID/maps lists now, as Mapping events
  // stamped `timestamp`; empty once the process is gone. prot is PROT_EXEC
  // only, as the perf source gives it. Safe from any thread.
  std::vector<Event> snapshot_mappings(pid_t pid, uint64_t timestamp);

  // mapping_records: Mapping events produced (both sources);
  // mapping_records_lost: records the kernel had no ring room for, so far:
  // mappings (anonymous code included), exec markers, and the fork and exit
  // records the kernel sends along; an upper bound on lost mappings;
  // mapping_records_dropped: malformed perf records, skipped.
  // Reads the loss counts from the kernel; throws std::system_error if that
  // fails.
  std::map<std::string, uint64_t> counters() const;

 private:
  class Ring;

  void read_ring(Ring& ring);

  std::vector<std::unique_ptr<Ring>> rings_;
  std::vector<uint8_t> wrapped_record_;  // a record copied out of the ring's wrap
  std::vector<PerfRecord> pending_;  // Mapping and Exec records awaiting the watermark
  // Pids whose exec has replaced the address space and whose first mapping
  // of the new image has not been emitted yet.
  std::set<int32_t> exec_in_progress_;
  std::string fallback_reason_;
  std::atomic<uint64_t> records_{0}, dropped_{0};
};

}  // namespace memtrack
