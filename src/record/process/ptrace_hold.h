// Holding the recorded tasks without job-control stops (`record --hold
// ptrace`, docs/RELIABILITY.md): a tracer thread of the recorder seizes the
// command before its exec and, through PTRACE_O_TRACEFORK/VFORK/CLONE/EXEC,
// every task it starts. memtrack's stops stay SIGSTOPs sent by the kernel
// (SI_KERNEL), but a traced task that takes one enters a signal-delivery-stop
// the tracer keeps as a hold: it turns it into a PTRACE_EVENT_STOP (the
// SIGSTOP is suppressed), interrupts the other threads of the process, and
// resumes them all at release(). No group stop happens, so the command's own
// processes (a parent waiting with WUNTRACED, a job-control shell) see none.
// Every other signal is passed on; a user's stop signal becomes the group stop
// it would have been (PTRACE_LISTEN until SIGCONT), so job control works.
//
// When the tracer thread ends (stop(), or the recorder dies) the kernel
// detaches every task: held tasks are in PTRACE_EVENT_STOPs, which just end.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "record/process/target_process.h"

namespace memtrack {

class PtraceHold final : public CommandReaper {
 public:
  // Seizes `command`, stopped before its exec by TargetProcess. Throws
  // std::runtime_error naming the reason when the kernel refuses (the
  // command is traced already, Yama, no CAP_SYS_PTRACE, seccomp). With
  // `hold_children`, every new process is held from its first stop (where
  // the kernel would stop it with a SIGSTOP: BpfConfig::ptrace_hold).
  PtraceHold(pid_t command, bool hold_children);
  ~PtraceHold() override;
  PtraceHold(const PtraceHold&) = delete;
  PtraceHold& operator=(const PtraceHold&) = delete;

  // Ends memtrack's hold of process `tgid` (what SIGCONT does in signal
  // mode). Any thread. A release that comes before its stop is taken cancels
  // that stop. After stop(), sends SIGCONT.
  void release(pid_t tgid);
  // Resumes every held task and detaches from every task. Idempotent.
  void stop();

  bool reaping() const override { return !stopped_.load(); }
  std::optional<int> command_status() override;

  std::map<std::string, uint64_t> counters() const;

 private:
  struct Task {
    pid_t tgid = 0;
    bool started = false;       // its first stop was seen
    bool stopped = false;       // in a ptrace stop this tracer left it in
    bool group_stop = false;    // that stop is a group stop (resumed by PTRACE_LISTEN)
    bool interrupted = false;   // a PTRACE_INTERRUPT is on its way
    int inject = 0;             // the signal to deliver when it resumes
  };
  struct Process {
    std::set<pid_t> tids;
    bool held = false;
    std::chrono::steady_clock::time_point held_since;
    bool released_early = false;  // a release came while its SIGSTOP was pending
  };

  void run(int seized_fd);
  void drain_stops();
  void on_stop(pid_t tid, int status);
  void on_gone(pid_t tid, int status);
  Task& task(pid_t tid, pid_t tgid_hint = 0);
  void hold(pid_t tgid);
  void park_or_resume(pid_t tid);
  void resume(pid_t tid);
  void handle_release(pid_t tgid);
  // Ends holds no release came for (a safety net: counted, never expected).
  void expire_holds();
  // Detaches from every task; returns the processes released before their
  // SIGSTOP was taken (it becomes a group stop once untraced).
  std::vector<pid_t> detach_all();
  bool sigstop_pending(pid_t tgid) const;

  pid_t command_;
  bool hold_children_;
  int wake_fd_ = -1;  // eventfd: requests are waiting
  std::thread thread_;
  std::atomic<bool> stopped_{false};

  mutable std::mutex mutex_;  // guards the fields below it, shared with other threads
  std::vector<pid_t> releases_;
  bool stop_requested_ = false;
  bool detached_ = false;  // the tracer thread has ended: releases are SIGCONTs
  std::optional<int> command_status_;

  std::atomic<uint64_t> holds_{0}, early_releases_{0}, stale_releases_{0}, tasks_traced_{0}, signals_passed_{0},
      stops_handled_{0}, holds_expired_{0};

  // The tracer thread's own state.
  std::map<pid_t, Task> tasks_;
  std::map<pid_t, Process> processes_;
};

}  // namespace memtrack
