// Jobs handled one at a time on a thread of their own, through a
// BoundedQueue (util/bounded_queue.h).
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <utility>

#include "util/bounded_queue.h"

namespace memtrack {

template <typename Job>
class WorkQueue {
 public:
  // Unbounded by default: the producers (the ring poller) must never wait
  // for the job thread, which may itself wait for a stopped process.
  // The thread starts at once: construct the queue after what `handle` uses.
  explicit WorkQueue(std::function<void(Job&)> handle, size_t capacity = BoundedQueue<Job>::kUnbounded)
      : handle_(std::move(handle)), jobs_(capacity), thread_([this] { run(); }) {}
  ~WorkQueue() { stop(); }
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // `urgent` jobs go ahead of the others. Jobs pushed after stop() are dropped.
  void push(Job job, bool urgent = false) {
    jobs_.push(std::move(job), 1, urgent ? BoundedQueue<Job>::Priority::Urgent : BoundedQueue<Job>::Priority::Normal);
  }

  // Blocks until every job pushed so far has been handled.
  void drain() { jobs_.wait_idle(); }

  // Stops the thread after the job in hand; returns the jobs never handled.
  std::deque<Job> stop() {
    std::deque<Job> left = jobs_.shutdown();
    if (thread_.joinable()) thread_.join();
    return left;
  }

 private:
  void run() {
    while (std::optional<Job> job = jobs_.pop()) {
      handle_(*job);
      jobs_.task_done();
    }
  }

  std::function<void(Job&)> handle_;
  BoundedQueue<Job> jobs_;
  std::thread thread_;
};

}  // namespace memtrack
