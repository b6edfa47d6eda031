#include "record/probe_attacher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

#include "record/allocator_symbols.h"
#include "record/proc_fs.h"

namespace memtrack {

namespace {

// How long to wait for a stopped task's mappings to settle before reading them.
constexpr int kStopWaitMs = 1000;

bool same_file(const std::string& path, uint64_t dev, uint64_t ino) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && kernel_dev_of(st.st_dev) == dev && st.st_ino == ino;
}

}  // namespace

ProbeAttacher::ProbeAttacher(BpfSession& session) : session_(session), worker_([this] { run(); }) {}

ProbeAttacher::~ProbeAttacher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  worker_.join();
  // Never leave a task stopped behind.
  for (const auto& r : queue_) kill(r.pid, SIGCONT);
}

void ProbeAttacher::submit(const AttachRequest& request) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(request);
  }
  wake_.notify_one();
}

void ProbeAttacher::drain() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

void ProbeAttacher::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    AttachRequest request = queue_.front();
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    handle(request);
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

void ProbeAttacher::handle(const AttachRequest& request) {
  // The task was stopped right after its mmap call; once it is stopped the
  // new mapping is visible in /proc/PID/maps.
  wait_until_stopped(request.pid, kStopWaitMs);
  probe_file(request.pid, request.dev, request.ino);
  {
    std::lock_guard lock(mutex_);
    ++requests_handled_;
  }
  kill(request.pid, SIGCONT);
}

void ProbeAttacher::probe_mapped_files(pid_t pid) {
  for (const auto& m : read_maps(pid))
    if (m.executable && m.ino != 0) probe_file(pid, m.kernel_dev(), m.ino);
}

void ProbeAttacher::probe_file(pid_t pid, uint64_t dev, uint64_t ino) {
  {
    std::lock_guard lock(mutex_);
    if (!inspected_.insert({dev, ino}).second) return;
    ++files_inspected_;
  }
  std::string path;
  for (const auto& m : read_maps(pid)) {
    if (m.kernel_dev() != dev || m.ino != ino) continue;
    if (!m.path.empty() && m.path[0] == '/' && same_file(m.path, dev, ino)) {
      path = m.path;
    } else {
      // Deleted, replaced, or in another mount namespace: open what is mapped.
      char name[96];
      std::snprintf(name, sizeof(name), "/proc/%d/map_files/%lx-%lx", pid, (unsigned long)m.start,
                    (unsigned long)m.end);
      path = name;
    }
    break;
  }
  if (path.empty()) {
    std::lock_guard lock(mutex_);
    ++files_unresolved_;
    inspected_.erase({dev, ino});  // a later request may find it
    return;
  }

  std::vector<ProbeSite> sites;
  try {
    sites = find_probe_sites(path);
  } catch (const std::exception& e) {
    warn(std::string("cannot inspect ") + path + ": " + e.what());
  }
  std::vector<ProbePoint> points;
  for (const auto& site : sites) points.push_back({site.probe_offset, site.cookie, !site.needs_return});
  std::string error;
  size_t attached = points.empty() ? 0 : session_.attach_probes(path, points, &error);
  size_t wanted = 0;
  for (const auto& p : points) wanted += p.is_free ? 1 : 2;
  size_t failed = wanted - attached;
  if (failed) warn("cannot attach " + std::to_string(failed) + " probe(s) in " + path + ": " + error);
  session_.mark_file_known(dev, ino);
  std::lock_guard lock(mutex_);
  probes_attached_ += attached;
  probe_attach_failures_ += failed;
  if (!sites.empty()) probed_files_.push_back({path, sites.size()});
}

void ProbeAttacher::warn(std::string message) {
  std::lock_guard lock(mutex_);
  warnings_.push_back(std::move(message));
}

std::map<std::string, uint64_t> ProbeAttacher::counters() const {
  std::lock_guard lock(mutex_);
  return {
      {"files_inspected", files_inspected_},
      {"files_with_allocators", probed_files_.size()},
      {"probes_attached", probes_attached_},
      {"probe_attach_failures", probe_attach_failures_},
      {"files_unresolved", files_unresolved_},
      {"attach_requests_handled", requests_handled_},
  };
}

std::vector<std::string> ProbeAttacher::warnings() const {
  std::lock_guard lock(mutex_);
  return warnings_;
}

std::vector<ProbedFile> ProbeAttacher::probed_files() const {
  std::lock_guard lock(mutex_);
  return probed_files_;
}

}  // namespace memtrack
