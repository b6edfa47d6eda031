// The dedicated ring poller thread: drains the kernel's rings (and the perf
// rings of the MappingCollector) on a timer (the kernel wakes it early only
// when a batch has accumulated), turns records into events in time order, and
// hands batches to the pipeline. Attach requests go to the ProbeAttacher;
// paused producers are resumed once the ring is drained.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "format/event.h"
#include "record/probes/bpf_session.h"
#include "record/intake/event_order.h"
#include "record/intake/mapping_collector.h"
#include "record/probes/probe_attacher.h"
#include "record/unwind_rules/unwind_learner.h"

struct ring_buffer;
struct mt_stack_header;

namespace memtrack {

class InterposerChannel;
class InterposerStacks;

class RingPoller {
 public:
  using Sink = std::function<void(std::vector<Event>&&)>;
  // How many more interposer events the sink should be given now, waiting up
  // to the given time while it is none.
  using Room = std::function<size_t(std::chrono::milliseconds wait)>;

  struct Wiring {
    Sink sink;  // takes each batch, in time order
    // Where batches get their storage: one the sink is done with, so the
    // poller does not fault in fresh pages for every batch (a page fault
    // costs microseconds under page-table isolation).
    std::function<std::vector<Event>()> spare_batch;
    // The interposer fast path's events, drained with the rings, no more at
    // a time than `interposer_room` allows: the rest waits in the chunks, and
    // their threads wait when a chunk is full, as the kernel pauses
    // producers. With call paths, the interposers' stack definitions too.
    InterposerChannel* interposer = nullptr;
    Room interposer_room;
    InterposerStacks* interposer_stacks = nullptr;
  };

  // `learner` is null when stacks are not captured.
  RingPoller(BpfSession& session, ProbeAttacher& attacher, MappingCollector& mappings, UnwindLearner* learner,
             Wiring wiring);
  ~RingPoller();
  RingPoller(const RingPoller&) = delete;
  RingPoller& operator=(const RingPoller&) = delete;

  void start();
  // Events made elsewhere (e.g. /proc mapping snapshots), merged in time
  // order with the rings' events. Any thread.
  void post(std::vector<Event>&& events);
  // Every event stamped at or before this time has been handed to the sink
  // (0 before the first hand-over). Any thread.
  uint64_t handed_through() const { return handed_through_.load(); }
  // Drains the rings (events, process, stacks; the perf rings of the
  // mapping collector) completely, flushes every pending event and joins.
  void stop();

  std::map<std::string, uint64_t> counters() const;

 private:
  static int on_alloc_record(void* self, void* data, size_t size);
  static int on_memory_record(RingPoller* self, const void* data);
  static int on_process_record(void* self, void* data, size_t size);
  static int on_stack_record(void* self, void* data, size_t size);
  // The interposer's Python code definitions after a stack definition's
  // frames, as PythonCode events, up to `end`; false when they overrun it.
  bool take_python_codes(const mt_stack_header& h, const uint8_t* at, const uint8_t* end);
  void run();
  // Waits up to `timeout_ms` for a ring or the interposer to have data.
  void wait_for_data(int timeout_ms);
  // Emits pending events up to `watermark` ns (all of them when `everything`).
  void flush(uint64_t watermark, bool everything);
  void wait_for_stop_and_interposer_too();

  BpfSession& session_;
  ProbeAttacher& attacher_;
  MappingCollector& mappings_;
  UnwindLearner* learner_;
  Sink sink_;
  std::function<std::vector<Event>()> spare_batch_;
  std::vector<Event> batch_;  // the next batch's storage
  std::mutex posted_mutex_;
  std::vector<Event> posted_;
  ring_buffer* rings_ = nullptr;
  InterposerChannel* interposer_ = nullptr;
  Room interposer_room_;
  bool interposer_behind_ = false;  // the last drain left events for want of room
  InterposerStacks* interposer_stacks_ = nullptr;
  int wait_fd_ = -1;  // epoll: the rings' epoll, stop_fd_ and the interposer's wake-up
  int stop_fd_ = -1;  // an eventfd, readable once stop() is called
  EventOrder order_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> handed_through_{0};
  std::thread thread_;
  uint64_t last_pause_generation_ = 0;
  // Processes whose interposer records (ready, or forked from one that is);
  // an exec leaves them until the new image's interposer is ready.
  std::set<pid_t> interposed_;
  std::set<pid_t> ever_interposed_;  // counted once each
  std::atomic<uint64_t> events_received_{0}, malformed_records_{0}, resumed_producers_{0},
      unwind_restores_failed_{0}, interposed_processes_{0};
};

}  // namespace memtrack
