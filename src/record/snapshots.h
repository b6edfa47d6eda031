// Snapshots while recording: the live heap by call path at a moment (what
// `memtrack report FILE --at T` shows) written as a pprof profile next to the
// artifact, on SIGUSR1 to memtrack, every --snapshot-every seconds and when a
// --snapshot-when condition starts to hold (README, "Profile a running
// service").
//
// A snapshot closes the artifact's current frame and runs `memtrack report
// ARTIFACT --at T --format pprof` on the file as written so far, in a child
// process at a lower priority: the recording goes on meanwhile and the
// figures are those of the existing analysis, so the snapshot equals `report
// --at T` of the finished artifact. The profile goes to an unnamed file
// (O_TMPFILE) that is linked under its name once complete: a snapshot is
// whole or absent, also when memtrack is killed.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace memtrack {

class ArtifactWriter;

// The signal that asks for a snapshot (sent to memtrack's pid; the guardian
// passes it to the recorder, never to the command).
inline constexpr int kSnapshotSignal = SIGUSR1;

// `--snapshot-when FIGURE>=VALUE`: rss (the process tree's resident memory),
// heap (the bytes of the blocks live) at or above a size, or cgroup (the
// memory the target's cgroup uses, as the OOM killer counts it) at or above
// a percentage of its limit: memory.max in cgroup v2, memory.limit_in_bytes
// in v1's memory hierarchy, of the target's cgroup or the nearest parent
// that sets one when recording starts.
struct SnapshotCondition {
  enum class Figure { Rss, Heap, Cgroup };
  Figure figure = Figure::Heap;
  uint64_t bytes = 0;   // Rss, Heap
  double fraction = 0;  // Cgroup: of the limit, in (0, 1]
  std::string text;     // as given
};

// "heap>=512MiB", "rss>=2GiB", "cgroup>=90%" (units B KiB MiB GiB TiB).
// Throws std::invalid_argument saying what is wrong.
SnapshotCondition parse_snapshot_condition(std::string_view text);

struct SnapshotOptions {
  double every_s = 0;  // 0: no interval
  std::vector<SnapshotCondition> when;
};

// A condition fires when its figure reaches the threshold, then again each
// time the figure grows 10 % past the value it last fired at; once the
// figure is back below the threshold, the next crossing fires again.
class ConditionArming {
 public:
  explicit ConditionArming(uint64_t threshold) : threshold_(threshold), armed_at_(threshold) {}
  // Whether `value` fires the condition now.
  bool fires(uint64_t value);

 private:
  uint64_t threshold_;
  uint64_t armed_at_;
};

// The cgroup whose memory limit applies to a process, and what it uses.
struct CgroupLimit {
  std::string dir;
  std::string usage_file;  // memory.current (v2), memory.usage_in_bytes (v1)
  uint64_t limit = 0;      // memory.max (v2), memory.limit_in_bytes (v1)
};

class SnapshotTaker {
 public:
  struct Recording {
    ArtifactWriter& writer;
    std::string output;  // the artifact's name: snapshots are OUTPUT minus .zst, .snapshot-N.pb.gz
    uint64_t start_monotonic_ns = 0;  // the header's: --at counts from it
    pid_t root = 0;                   // the process tree watched by rss and cgroup
    // Waits until every event stamped at or before the time it returns is
    // appended to the writer; the time is as recent as that allows.
    std::function<uint64_t()> events_appended_through;
    // record --aggregate: the file keeps no events to pick a moment from;
    // a snapshot is the report of the writer's checkpoint taken for it.
    bool aggregated = false;
  };
  // Starts watching at once; SIGUSR1 must be blocked in every thread of the
  // recorder (run_guarded blocks it).
  SnapshotTaker(const SnapshotOptions& options, Recording recording);
  // Waits for a snapshot in progress.
  ~SnapshotTaker() { stop(); }
  SnapshotTaker(const SnapshotTaker&) = delete;
  SnapshotTaker& operator=(const SnapshotTaker&) = delete;

  void stop();
  // snapshots_written, snapshots_failed, snapshots_on_signal,
  // snapshots_on_interval, snapshots_on_condition, snapshot_longest_ms.
  std::map<std::string, uint64_t> counters() const;
  // The file of snapshot `number` for the artifact `output`.
  static std::string file_name(const std::string& output, uint64_t number);

 private:
  enum class Trigger { Signal, Interval, Condition };
  void run();
  // The figure a condition watches now; nullopt when it cannot be had.
  std::optional<uint64_t> figure_now(const SnapshotCondition& condition);
  void take(Trigger trigger, const std::string& why);

  SnapshotOptions options_;
  Recording recording_;
  std::vector<ConditionArming> arming_;
  std::optional<CgroupLimit> cgroup_;  // the target's nearest limit, for cgroup>=N%
  std::atomic<bool> stopping_{false};
  int wake_fd_ = -1;  // an eventfd stop() writes to
  std::atomic<uint64_t> written_{0}, failed_{0}, on_signal_{0}, on_interval_{0}, on_condition_{0}, longest_ms_{0};
  std::thread thread_;
};

}  // namespace memtrack
