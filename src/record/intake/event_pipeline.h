// Moves event batches from the ring poller to the artifact writer on its own
// thread. Bounded by the memory the queued events hold: when the writer falls
// behind, the poller waits, the ring fills and the kernel pauses the
// producers; nothing is dropped. After a write error (e.g. the disk is full)
// batches are still taken and counted, so the poller and the kernel keep going
// until the recording is stopped.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "format/artifact.h"
#include "format/event.h"
#include "util/bounded_queue.h"

namespace memtrack {

class EventPipeline {
 public:
  // `observe`, when given, sees every batch before it is written (on the
  // pipeline's thread).
  using Observer = std::function<void(const std::vector<Event>&)>;
  EventPipeline(ArtifactWriter& writer, Observer observe);
  ~EventPipeline() { close(); }
  EventPipeline(const EventPipeline&) = delete;
  EventPipeline& operator=(const EventPipeline&) = delete;

  // An empty batch with the storage of a written one, if any. Any thread.
  std::vector<Event> spare_batch();
  void push(std::vector<Event>&& batch);
  // How many interposer events the poller should drain now: as many as keep
  // the queue's events under kInterposerQueuedBytes. When there is no room,
  // waits up to `wait` for the queue to be half empty.
  size_t interposer_room(std::chrono::milliseconds wait);
  // Waits for the writer to take every batch.
  void close();
  // Waits until the writer has taken every batch pushed before the call
  // (or the pipeline closed). Any thread but the one that pushes.
  void sync();
  // The writer's first error, or empty. Any thread. Asks the writer too: a
  // frame that fails after the last append (the program went quiet) would
  // otherwise be known only at finish.
  std::string error() const;
  // Records taken after the write error, not written.
  uint64_t dropped() const;

 private:
  // A few frames' worth of events; a stack-heavy batch counts its copies.
  static constexpr size_t kMaxQueuedBytes = size_t{64} << 20;
  // The interposer's events are drained only while the queue holds less:
  // they wait in their chunks instead (shared memory, already resident,
  // 56 bytes an event against an Event's 120), and a full chunk makes its
  // thread wait, so a program that allocates faster than the writer packs
  // does not fill the queue. Drained as fast as they came, they filled it
  // towards kMaxQueuedBytes in whole-chunk batches that the spare pools
  // then kept: the recorder of a 400,000-call malloc loop was ~33 MiB
  // bigger than on the uprobe path, whose events come slower than the
  // writer takes them.
  static constexpr size_t kInterposerQueuedBytes = size_t{256} << 10;
  // Written batches kept for the poller to fill again.
  static constexpr size_t kSpareBatches = 4;

  static size_t memory_of(const std::vector<Event>& batch);
  void run();

  ArtifactWriter& writer_;
  Observer observe_;
  mutable std::mutex mutex_;
  std::string error_;
  uint64_t dropped_ = 0;
  std::vector<std::vector<Event>> spare_batches_;
  std::atomic<uint64_t> batches_pushed_{0};
  uint64_t batches_taken_ = 0;  // under mutex_; written or dropped
  bool finished_ = false;       // under mutex_: run() returned
  std::condition_variable batch_taken_;
  BoundedQueue<std::vector<Event>> batches_{kMaxQueuedBytes};
  std::thread thread_;  // last: it uses the members above
};

}  // namespace memtrack
