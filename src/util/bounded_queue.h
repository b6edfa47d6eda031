// The one queue between memtrack's threads: producers block while it is
// full, consumers while it is empty. Its capacity is counted in units each
// item declares (1 for a job, bytes for a batch of events), so a queue can be
// bounded by the memory it holds rather than by its length.
//
// Contract:
// - push() blocks while the queued cost plus the item's would exceed the
//   capacity. An item costing more than the whole capacity is taken when the
//   queue is empty (else it could never be), so a producer never waits
//   forever on a live consumer.
// - close(): producers can push no more (push returns false, the item is
//   dropped and the caller must count it); consumers still get every queued
//   item, then nullopt.
// - shutdown(): close() and take every queued item back; consumers get
//   nullopt at once (what they hold in hand they finish). For a consumer that
//   failed, or a stop that must not wait for the backlog.
// - task_done()/wait_idle(): a consumer calls task_done() after handling each
//   popped item; wait_idle() returns when every pushed item was handled (or
//   taken back by shutdown()).
// - Urgent items go ahead of the others (FIFO among themselves).
// Every member may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>
#include <utility>

namespace memtrack {

template <typename T>
class BoundedQueue {
 public:
  static constexpr size_t kUnbounded = std::numeric_limits<size_t>::max();

  explicit BoundedQueue(size_t capacity) : capacity_(capacity) {}
  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  enum class Priority { Normal, Urgent };

  // Blocks while full; false when the queue is closed (the item is dropped).
  bool push(T item, size_t cost = 1, Priority priority = Priority::Normal) {
    std::unique_lock lock(mutex_);
    space_.wait(lock, [&] {
      return closed_ || items_.empty() || (queued_cost_ <= capacity_ && cost <= capacity_ - queued_cost_);
    });
    if (closed_) return false;
    queued_cost_ += cost;
    ++unfinished_;
    if (priority == Priority::Urgent) {
      items_.insert(items_.begin() + static_cast<std::ptrdiff_t>(urgent_), Entry{std::move(item), cost});
      ++urgent_;
    } else {
      items_.push_back(Entry{std::move(item), cost});
    }
    ready_.notify_one();
    return true;
  }

  // Blocks while empty and open; nullopt once closed and drained.
  std::optional<T> pop() {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return !items_.empty() || closed_; });
    if (items_.empty()) return std::nullopt;
    Entry entry = std::move(items_.front());
    items_.pop_front();
    if (urgent_ > 0) --urgent_;
    queued_cost_ -= entry.cost;
    space_.notify_all();  // costs differ: any waiting producer may fit now
    return std::move(entry.item);
  }

  void task_done() {
    std::lock_guard lock(mutex_);
    if (unfinished_ > 0 && --unfinished_ == 0) idle_.notify_all();
  }

  void wait_idle() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return unfinished_ == 0; });
  }

  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    ready_.notify_all();
    space_.notify_all();
  }

  std::deque<T> shutdown() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    std::deque<T> taken;
    for (Entry& entry : items_) taken.push_back(std::move(entry.item));
    unfinished_ -= items_.size();
    items_.clear();
    urgent_ = 0;
    queued_cost_ = 0;
    if (unfinished_ == 0) idle_.notify_all();
    ready_.notify_all();
    space_.notify_all();
    return taken;
  }

  // Waits up to `timeout` until the queued cost is at most `level` (or the
  // queue is closed); returns the queued cost then.
  size_t wait_until_at_most(size_t level, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    space_.wait_for(lock, timeout, [&] { return closed_ || queued_cost_ <= level; });
    return queued_cost_;
  }

  size_t capacity() const { return capacity_; }
  // The cost queued now: for statistics and tests.
  size_t queued_cost() const {
    std::lock_guard lock(mutex_);
    return queued_cost_;
  }

 private:
  struct Entry {
    T item;
    size_t cost;
  };

  const size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable ready_, space_, idle_;
  std::deque<Entry> items_;
  size_t urgent_ = 0;       // the urgent items lead items_
  size_t queued_cost_ = 0;  // of items_
  size_t unfinished_ = 0;   // pushed, not yet task_done() nor taken back
  bool closed_ = false;
};

}  // namespace memtrack
