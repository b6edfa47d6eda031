// Attaches allocator probes to the files tracked processes map. Requests come
// from the kernel: a tracked task mapped an unknown executable file (or, with
// per-process probes, a tracked process forked a child) and has been stopped.
// The attacher probes every executable file the process maps that is not
// probed for it yet, tells the kernel, and resumes the process. Each file's
// ELF is inspected once.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "record/probes/bpf_session.h"
#include "record/unwind_rules/unwind_learner.h"
#include "record/work_queue.h"

namespace memtrack {

class InterposerChannel;

class ProbeAttacher {
 public:
  struct Wiring {
    // Gets each probed process's module table while the process is stopped
    // (null when stacks are not captured).
    UnwindLearner* learner = nullptr;
    // The interposer fast path, when on: the interposer's ready function is
    // probed (once, in every process); a process that maps the interposer
    // gets the word that lets it record; glibc's entry points it takes are
    // marked in their cookies.
    InterposerChannel* interposer = nullptr;
    std::string interposer_library;
    // Loaded into running processes (record --pid), the interposer takes
    // glibc's names only: the other allocators' entry points keep their probes.
    bool interposer_takes_glibc_only = false;
    // Called on the attacher's thread after each process it stopped has been
    // probed, while it is still stopped (e.g. to snapshot its mappings).
    std::function<void(pid_t)> after_probe;
  };
  ProbeAttacher(BpfSession& session, Wiring wiring);
  ~ProbeAttacher();  // stops the worker thread, resuming anything still waiting
  ProbeAttacher(const ProbeAttacher&) = delete;
  ProbeAttacher& operator=(const ProbeAttacher&) = delete;

  // Synchronously probes every executable file `pid` maps now.
  void probe_process(pid_t pid);
  // Queues: probe `pid`'s files (with `renew`, drop its probes and make them
  // all anew), then resume it.
  void submit(pid_t pid, bool renew = false);
  // Queues: `pid`'s interposer records from now on; detach the probes of the
  // files whose every entry point it takes.
  void submit_interposed(pid_t pid);
  // Queues: `pid` has exited; detach its probes.
  void process_exited(pid_t pid);
  // Blocks until every queued request has been handled.
  void drain();

  std::map<std::string, uint64_t> counters() const;
  std::vector<std::string> warnings() const;

 private:
  void use_interposer(InterposerChannel* channel, const std::string& library);
  using FileId = std::pair<uint64_t, uint64_t>;  // kernel dev, inode
  struct Request {
    enum Kind { kProbe, kRenew, kExited, kInterposed };
    pid_t pid;
    Kind kind;
  };
  struct FileProbes {
    std::string path;
    std::vector<ProbePoint> points;
  };
  void handle(const Request& request);
  // The probe points of a file (inspected on first use); `path` opens it.
  const FileProbes& file_probes(const FileId& id, const std::string& path);
  // Drops `pid`'s probes; with `now`, they are gone before this returns.
  void forget_process(pid_t pid, bool now = false);
  // The interposer is mapped by stopped `pid`: let it record, if its ready
  // function is probed.
  void prepare_interposer(pid_t pid);
  void leave_to_interposer(pid_t pid);
  // Stopped `pid` runs an executable whose runtime must come first (a
  // sanitizer's, record/process/sanitizer_runtime.h) and has not loaded the
  // interposer yet: take the interposer out of its LD_PRELOAD.
  void keep_runtime_first(pid_t pid);
  void warn(std::string message);

  BpfSession& session_;
  UnwindLearner* learner_;
  std::function<void(pid_t)> after_probe_;
  mutable std::mutex mutex_;
  mutable std::mutex files_mutex_;  // inspection may run on the worker and the caller of probe_process
  std::map<FileId, FileProbes> files_;
  std::map<pid_t, std::set<FileId>> probed_for_;     // files probed per process (pid 0: globally)
  uint64_t files_with_allocators_ = 0;
  InterposerChannel* interposer_ = nullptr;
  FileId interposer_file_{0, 0};
  std::string interposer_library_;
  std::map<FileId, std::string> runtime_first_;  // by executable: the runtime that must come first, or ""
  uint64_t runtime_first_processes_ = 0;
  std::set<pid_t> runtime_kept_first_;  // processes whose LD_PRELOAD lost the interposer, until they exec
  uint64_t interposer_ready_offset_ = 0;
  bool interposer_ready_probed_ = false;
  bool interposer_takes_glibc_only_ = false;
  uint64_t interposer_probe_failures_ = 0;
  std::vector<std::string> warnings_;
  uint64_t probes_attached_ = 0, probe_attach_failures_ = 0, requests_handled_ = 0;
  WorkQueue<Request> requests_;  // last: its thread uses the members above
};

}  // namespace memtrack
