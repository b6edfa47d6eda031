// Attaches allocator probes to the files tracked processes map. Requests come
// from the kernel (a tracked task mapped an unknown executable file and has
// been stopped); the attacher inspects the file once, attaches its probes,
// tells the kernel the file is known and resumes the task.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "record/bpf_session.h"

namespace memtrack {

struct AttachRequest {
  pid_t pid = 0;
  uint64_t dev = 0;  // kernel s_dev encoding
  uint64_t ino = 0;
};

struct ProbedFile {
  std::string path;
  size_t sites = 0;
};

class ProbeAttacher {
 public:
  explicit ProbeAttacher(BpfSession& session);
  ~ProbeAttacher();  // stops the worker thread, resuming anything still waiting
  ProbeAttacher(const ProbeAttacher&) = delete;
  ProbeAttacher& operator=(const ProbeAttacher&) = delete;

  // Synchronously probes every executable file `pid` maps now (attaching to a
  // running process).
  void probe_mapped_files(pid_t pid);
  // Queues a kernel request; the worker thread handles it.
  void submit(const AttachRequest& request);
  // Blocks until every submitted request has been handled.
  void drain();

  std::map<std::string, uint64_t> counters() const;
  std::vector<std::string> warnings() const;
  std::vector<ProbedFile> probed_files() const;

 private:
  void run();
  void handle(const AttachRequest& request);
  // Inspects and probes the file (dev, ino) found through `pid`'s mappings.
  void probe_file(pid_t pid, uint64_t dev, uint64_t ino);
  void warn(std::string message);

  BpfSession& session_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<AttachRequest> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::set<std::pair<uint64_t, uint64_t>> inspected_;
  std::vector<ProbedFile> probed_files_;
  std::vector<std::string> warnings_;
  uint64_t files_inspected_ = 0, probes_attached_ = 0, probe_attach_failures_ = 0,
           files_unresolved_ = 0, requests_handled_ = 0;
  std::thread worker_;
};

}  // namespace memtrack
