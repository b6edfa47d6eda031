// Owns the loaded BPF skeleton: configuration, the process-tree programs, the
// allocator probe links, and the kernel's loss counters.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "record/probes/kernel_features.h"
#include "wire/events.h"
#include "wire/unwind_rule.h"

struct memtrack_bpf;
struct bpf_link;
struct bpf_program;

namespace memtrack {

// Mapped twice by libbpf (so a record can wrap), a ring counts twice its size
// in the recorder's RSS, whether used or not. When every allocation goes
// through the uprobes, 8 MiB pauses producers at 6 MiB, tens of ms of the
// fastest production measured (docs/benchmarks-history.md, footprint), and
// the stack ring's 16 MiB hold ~400 definitions with a 32 KiB raw copy. On
// the fast path the rings carry the memory records, the calls before each
// process's interposer is ready and the few processes it cannot serve: a
// fraction of that (docs/BENCHMARKS.md, "memtrack's own memory").
struct RingSizes {
  uint64_t event_ring_bytes;
  uint64_t stack_ring_bytes;
};
inline constexpr RingSizes kUprobeRings{8ull << 20, 16ull << 20};
inline constexpr RingSizes kFastPathRings{1ull << 20, 1ull << 20};

struct BpfConfig {
  uint64_t event_ring_bytes = kUprobeRings.event_ring_bytes;
  uint64_t process_ring_bytes = 2ull << 20;
  bool empty_probes = false;  // benchmark floor: probes attached but do nothing
  // How the allocator probes are attached (record/probes/kernel_features.h).
  UprobeMechanism uprobes = UprobeMechanism::Session;
  // Probes per tracked process, so untracked processes pay nothing (a new
  // child is stopped until its probes exist: by bpf_send_signal_task, Linux
  // >= 6.13, or by the ptrace hold); else one set of probes for every
  // process, filtered in BPF.
  bool per_process = true;
  // A ptrace tracer holds the tasks (record/process/ptrace_hold.h): new children at
  // their first stop, without a SIGSTOP (one pending there would be a
  // job-control stop if the tracer died), and no stop once it is dying.
  bool ptrace_hold = false;
  // Without bpf_send_signal_task a new child stops itself at its first
  // return from fork (bpf/process.bpf.c).
  bool child_stops_itself = false;
  uint8_t stack_mode = 0;        // enum mt_stack_mode
  uint32_t stack_budget = 8192;  // bytes of stack copied per allocation
  uint64_t stack_ring_bytes = kUprobeRings.stack_ring_bytes;  // producers pause at half
  // Rss records (rss_stat) and mappings made outside the allocators.
  bool memory_records = true;
  bool rss_hook = true;  // false: RSS from /proc/PID/statm even where rss_stat is permitted
  // The rss_stat tracepoint of Linux < 6.2, which passes the counter's value
  // (record/probes/kernel_features.h).
  bool rss_count_argument = false;
  uint64_t rss_step_bytes = 256 * 1024;   // a change this big is recorded at once
  uint64_t rss_interval_ns = 10'000'000;  // smaller ones at most once per interval
  // The interposer fast path (src/interpose/) may serve tracked processes.
  bool interposer = false;
  // Ends a stop the kernel made; empty: SIGCONT (a ptrace hold releases instead).
  std::function<void(pid_t)> resume;
};

// One allocator entry point of a file to probe.
struct ProbePoint {
  uint64_t offset = 0;  // file offset of the probed instruction
  uint64_t cookie = 0;  // MT_COOKIE: the function's argument layout
  bool entry_only = false; // free-like functions and unwinder entries; else entry + return
};

// The skeleton opened, its maps sized for `sizes` (only event_ring_bytes,
// process_ring_bytes, stack_ring_bytes and stack_mode matter) and its largest
// maps created ahead of the load: the preallocated hashes, the rule table's
// buckets and the rings' memory, ~40-60 ms of a start's CPU, by two threads
// (the kernel's work: a second CPU takes half). Recording makes it on a
// thread of its own once the command is forked. Never throws: what fails is
// left to BpfSession.
class PreparedSkeleton {
 public:
  explicit PreparedSkeleton(const BpfConfig& sizes);
  ~PreparedSkeleton();
  PreparedSkeleton(const PreparedSkeleton&) = delete;
  PreparedSkeleton& operator=(const PreparedSkeleton&) = delete;
  memtrack_bpf* take();  // null when the skeleton could not be opened

 private:
  memtrack_bpf* skel_ = nullptr;
};

class BpfSession {
 public:
  // Loads and verifies the programs (with the skeleton `prepared`, when it
  // was sized as `config` says); throws std::runtime_error with libbpf's reason.
  explicit BpfSession(const BpfConfig& config, std::unique_ptr<PreparedSkeleton> prepared = nullptr);
  ~BpfSession();  // detaches every probe in parallel (each detach waits for RCU)
  BpfSession(const BpfSession&) = delete;
  BpfSession& operator=(const BpfSession&) = delete;

  bool per_process() const { return per_process_; }
  void track_process(pid_t pid, pid_t parent);
  // A file whose allocators are probed for `pid` (0: for every process), or
  // which has none: its mappings no longer stop the mapping task.
  void mark_file_known(pid_t pid, uint64_t kernel_dev, uint64_t ino);
  void forget_file(pid_t pid, uint64_t kernel_dev, uint64_t ino);
  // Attaches the probes of one file for `pid` (0: every process); return
  // probes before entry probes, so no call is seen entering without its
  // return. Returns the number of probes attached; on failure sets `error`.
  size_t attach_probes(const std::string& path, const std::vector<ProbePoint>& points, pid_t pid,
                       std::string* error);
  // Detaches, in the background, the probes of one file attached for `pid`
  // (its `path` as given to attach_probes).
  void detach_file(pid_t pid, const std::string& path);
  // Probes memtrack_interposer_ready at `offset` of the interposer `path`, in
  // every process (the program ignores untracked ones): when a process's
  // interposer calls it, the kernel leaves the process's glibc allocator calls
  // to it. False with `error` on failure.
  bool attach_interposer_ready(const std::string& path, uint64_t offset, std::string* error);
  // Whether `pid`'s interposer records its glibc allocator calls.
  bool is_interposed(pid_t pid) const;
  // Detaches a process's probes: in the background (it has exited), or
  // before returning, when new probes are about to replace them.
  void detach_process(pid_t pid, bool wait = false);
  // Attaches the empty probe_floor program at `offset` of `path`, entry and
  // return, the way allocation functions are probed, for this process only
  // (detach_process(getpid()) removes it). False with `error` on failure.
  bool attach_floor_probe(const std::string& path, uint64_t offset, std::string* error);

  // The map of tracked processes (tgid -> parent), for the guardian.
  int tracked_pids_fd() const;
  int event_ring_fd() const;
  int process_ring_fd() const;
  int stack_ring_fd() const;
  bool captures_stacks() const { return stack_mode_ != 0; }
  // False when the kernel refused the rss_stat hook (or memory records are
  // off): the recorder samples /proc/PID/statm instead.
  bool rss_hooked() const { return rss_hooked_; }
  // The tracked processes (tgids).
  std::vector<pid_t> tracked_pids() const;
  // The executable mappings the stack walker knows for `pid`.
  void set_module_table(pid_t pid, const mt_module_table& table);
  void forget_module_table(pid_t pid);
  // Gives the walker rules; returns how many the map took (it may be full).
  size_t add_unwind_rules(const std::vector<mt_rule_key>& keys, const std::vector<mt_unwind_rule>& rules);
  uint64_t pause_generation() const;
  // From now on the kernel stops no task and emits nothing.
  void end_recording();
  // Resumes every producer the kernel stopped for back-pressure; returns how many.
  size_t resume_paused();
  // Ends a stop the kernel made (SIGCONT, or the config's `resume`: a ptrace hold).
  void resume_task(pid_t pid) const;

  // Sums of the per-CPU kernel counters, by artifact counter name.
  std::map<std::string, uint64_t> counters() const;
  // Detaches every allocator probe now (in parallel), so teardown is fast.
  // Any thread, also while probes are being attached or closed.
  void detach_all();

 private:
  int attach_classic(const std::string& path, const ProbePoint& point, bool is_return, pid_t pid,
                     std::string* error);
  void close_in_background(const std::vector<int>& fds);
  void run_closer();
  // Closes queued descriptors until none is left.
  void close_queued();

  memtrack_bpf* skel_ = nullptr;
  UprobeMechanism uprobes_ = UprobeMechanism::Session;
  bool per_process_ = true;
  bool rss_hooked_ = false;
  bool memory_records_ = true;
  uint8_t stack_mode_ = 0;
  bpf_program* session_program_ = nullptr;  // the uprobe session program loaded
  bpf_program* rss_program_ = nullptr;      // the rss_stat program for this kernel
  std::vector<bpf_link*> process_links_;
  std::mutex probes_mutex_;
  // uprobe session links or classic perf events, by the pid they filter on.
  std::map<pid_t, std::vector<int>> probe_fds_;
  // The same descriptors by process and file (per-process probes only).
  std::map<std::pair<pid_t, std::string>, std::vector<int>> file_fds_;
  // Closers detach probes concurrently (each close waits for a grace period).
  std::condition_variable closing_ready_;
  std::deque<int> closing_;
  bool closers_finish_ = false;
  std::vector<std::thread> closers_;
  size_t idle_closers_ = 0;  // started or waiting, not closing
  std::function<void(pid_t)> resume_;
};

}  // namespace memtrack
