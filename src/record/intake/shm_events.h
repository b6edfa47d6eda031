// The recorder's side of the interposer fast path (src/interpose/): the
// shared memory the interposer of every recorded process writes its events
// into, what the command's environment needs to load it, the per-pid word
// that lets an interposer record, and the draining of its chunks.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "format/event.h"
#include "record/intake/event_order.h"
#include "record/intake/tsc_clock.h"

struct mt_shm_header;

namespace memtrack {

class InterposerChannel {
 public:
  // Creates the shared file in /dev/shm (owned by `owner_uid` when not -1,
  // the user the command runs as). `library` is the interposer's path. The
  // interposers stamp their records with the TSC where TscClock::usable says
  // so and `allow_tsc`, else with CLOCK_MONOTONIC; drain() and event_time()
  // give ns.
  InterposerChannel(std::string library, uid_t owner_uid, bool allow_tsc = true);
  ~InterposerChannel();  // unmaps and removes the file
  InterposerChannel(const InterposerChannel&) = delete;
  InterposerChannel& operator=(const InterposerChannel&) = delete;

  const std::string& library() const { return library_; }
  const std::string& path() const { return path_; }
  // How many chunks were claimed at some time (a high-water mark, raised
  // before a thread writes anything in its chunk or its stack ring).
  uint32_t chunks_used() const;
  // Removes the file now (the processes keep their mappings); the
  // destructor then leaves it alone.
  void remove_file();
  // `environment` (NAME=VALUE entries) with the interposer loaded first in
  // LD_PRELOAD (the user's own entries kept after it) and the file named.
  std::vector<std::string> environment_for_command(const std::vector<std::string>& environment) const;
  // Whether `pid`'s interposer may record (written while the process is
  // stopped, before its interposer runs).
  void set_decision(pid_t pid, bool interposer);
  // Adds the events published since the last call and stamped at or before
  // `watermark` to `order`, about `budget` of them at most, shared by the
  // chunks with events (a thread's events are in time order: the rest wait
  // in the chunk, so what is drained is taken whole, never split); frees the
  // chunks of exited threads and processes once drained. Returns the instant
  // up to which every chunk is drained: `watermark`, or just before the
  // first event the budget left in a chunk (what is stamped later may be
  // handed out only after it). Poller thread only.
  uint64_t drain(EventOrder& order, uint64_t watermark = UINT64_MAX, size_t budget = SIZE_MAX);
  // A reading of the clock for the conversion of the interposers' TSC
  // ticks: before anything of a poller pass is converted. Poller thread only.
  void take_clock_reading() {
    if (clock_) clock_->take_reading();
  }
  // The CLOCK_MONOTONIC time of a timestamp an interposer wrote (in its
  // records of call paths). Poller thread only.
  uint64_t event_time(uint64_t stamp) const { return clock_ ? clock_->to_ns(stamp) : stamp; }
  // `pid` exited or exec'd at `timestamp`: its chunks claimed before then are
  // freed once drained. Poller thread only.
  void process_gone(pid_t pid, uint64_t timestamp);
  // A descriptor that becomes readable when a producer asks to be drained.
  int wakeup_fd() const { return wakeup_fd_; }
  // Clears the wake-up descriptor.
  void acknowledge_wakeup();
  // No more recording: interposers stop and never wait for space again.
  void end();
  // Processes attached by `record --pid` whose interposer has put their GOT
  // entries back since the recording ended.
  uint32_t detached() const;
  std::map<std::string, uint64_t> counters() const;

 private:
  void watch_doorbell();

  std::string library_;
  std::string path_;
  bool file_removed_ = false;
  void* base_ = nullptr;
  mt_shm_header* header_ = nullptr;
  int wakeup_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::map<pid_t, uint64_t> gone_;  // pid -> when it exited or exec'd
  std::optional<TscClock> clock_;   // the interposers stamp TSC ticks
  uint64_t events_ = 0, chunks_freed_ = 0, malformed_ = 0;
  std::thread doorbell_thread_;
};

// Where the interposer library is: next to the memtrack executable (a build
// tree), else in ../lib/memtrack from it (installed: PREFIX/bin/memtrack,
// PREFIX/lib/memtrack/). Empty when it is in neither.
std::string find_interposer_library();

// The file offset of memtrack_interposer_ready in the interposer at `path`;
// throws std::runtime_error when it is not there.
uint64_t interposer_ready_offset(const std::string& path);

}  // namespace memtrack
