// `memtrack record` runs as a guardian process and a recorder process, so
// that nothing the recorder stopped stays stopped when the recorder dies
// (SIGKILL, the OOM killer, a crash) and the command's exit status is not
// lost with it:
//
//   shell ─ guardian (memtrack's pid, the job's process group)
//             ├─ sentry   (same process group; tells group signals apart)
//             └─ recorder (its own process group; BPF programs, probes, writer)
//                  └─ command (back in the job's process group)
//
// The guardian holds no probe: they go away with the recorder. It keeps the
// tracked-pid map the recorder hands it and is a child subreaper, so when the
// recorder dies it resumes every stopped tracked task, adopts the command,
// waits for it and exits with its status, and removes the files the recorder
// would have removed (the fast path's /dev/shm files). The recorder is outside the job's
// process group, so the group keeps a parent in the session (the guardian, or
// the recorder when the guardian is gone) and is never orphaned while a task
// is stopped (an orphaned group with a stopped member gets SIGHUP).
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

namespace memtrack {

// The recorder's side of the link to its guardian.
class GuardianLink {
 public:
  GuardianLink(int socket_fd, pid_t job_pgrp, pid_t guardian) : fd_(socket_fd), job_pgrp_(job_pgrp), guardian_(guardian) {}
  ~GuardianLink();
  GuardianLink(const GuardianLink&) = delete;
  GuardianLink& operator=(const GuardianLink&) = delete;

  // The command's pid, as soon as it is forked.
  void target_started(pid_t pid);
  // The BPF map of tracked processes (a duplicate goes to the guardian).
  void tracking(int tracked_pids_map_fd);
  void target_exited(int wait_status);
  // A file the recorder removes when it ends (its /dev/shm files): if it is
  // killed first, the guardian removes it, when it is still that file.
  void remove_if_left(const std::string& path);
  // Everything is resumed and written: nothing left to rescue. memtrack
  // exits with `exit_code` at once, however the recorder itself ends after
  // this (it releases its probes and maps after memtrack has exited). Said
  // once; later calls do nothing.
  void done(int exit_code);
  // The process group the command joins (the job's, where terminal signals go).
  pid_t job_pgrp() const { return job_pgrp_; }
  // Whether the guardian has died (the recorder then ends the recording early).
  bool guardian_gone() const;

 private:
  void send(int kind, long value, int fd = -1);
  int fd_;
  pid_t job_pgrp_;
  pid_t guardian_;
  bool done_sent_ = false;
};

// Forks the recorder, which runs `recorder` and returns its result from this
// function (so it leaves through main like a single process would); the
// calling process becomes the guardian and returns memtrack's exit code.
// `output` names the artifact in the guardian's messages.
int run_guarded(const std::string& output, const std::function<int(GuardianLink&)>& recorder);

}  // namespace memtrack
