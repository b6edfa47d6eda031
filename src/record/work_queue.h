// A queue of jobs handled one at a time on a thread of its own.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace memtrack {

template <typename Job>
class WorkQueue {
 public:
  // The thread starts at once: construct the queue after what `handle` uses.
  explicit WorkQueue(std::function<void(Job&)> handle) : handle_(std::move(handle)), thread_([this] { run(); }) {}
  ~WorkQueue() { stop(); }
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // `urgent` jobs go ahead of the others.
  void push(Job job, bool urgent = false) {
    {
      std::lock_guard lock(mutex_);
      if (urgent)
        jobs_.push_front(std::move(job));
      else
        jobs_.push_back(std::move(job));
    }
    wake_.notify_one();
  }

  // Blocks until every job pushed so far has been handled.
  void drain() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return jobs_.empty() && !busy_; });
  }

  // Stops the thread after the job in hand; returns the jobs never handled.
  std::deque<Job> stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::lock_guard lock(mutex_);
    return std::exchange(jobs_, {});
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      Job job = std::move(jobs_.front());
      jobs_.pop_front();
      busy_ = true;
      lock.unlock();
      handle_(job);
      lock.lock();
      busy_ = false;
      if (jobs_.empty()) idle_.notify_all();
    }
  }

  std::function<void(Job&)> handle_;
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<Job> jobs_;
  bool busy_ = false, stopping_ = false;
  std::thread thread_;
};

}  // namespace memtrack
