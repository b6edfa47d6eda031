// Starting the recorded command: stopped before its exec so the recorder can
// track it first, as the invoking user under sudo, with memtrack's
// stdin/stdout/stderr, environment and working directory.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace memtrack {

// The command's exec failed; code() is its errno (ENOENT: not found), for
// memtrack's exit status (126 or 127, as env and timeout).
class CommandError : public std::system_error {
 public:
  using std::system_error::system_error;
};

// Collects the command's exit status in place of TargetProcess's own
// waitpid, which would also take the stops of a command traced by another
// thread of the recorder (record/process/ptrace_hold.h).
class CommandReaper {
 public:
  virtual ~CommandReaper() = default;
  // False once it has stopped reaping (the command may run on).
  virtual bool reaping() const = 0;
  virtual std::optional<int> command_status() = 0;
};

class TargetProcess {
 public:
  // Forks; the child joins process group `pgrp` (0: memtrack's) and stops
  // itself before exec. Throws if `argv` cannot be run (the message names the
  // command). `environment` (NAME=VALUE entries), when given, replaces
  // memtrack's own for the command.
  explicit TargetProcess(const std::vector<std::string>& argv, pid_t pgrp = 0,
                         const std::vector<std::string>* environment = nullptr);
  ~TargetProcess();  // kills and reaps a child that was never waited for
  TargetProcess(const TargetProcess&) = delete;
  TargetProcess& operator=(const TargetProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Lets the child exec. Throws CommandError if the exec failed (e.g. command not found).
  void resume();
  // Waits for the child to exit, forwarding SIGINT/SIGTERM/SIGHUP/SIGQUIT sent
  // to memtrack (a terminal's Ctrl-C already reaches the child directly).
  // Returns the raw wait status. `keep_waiting` is called about every 100 ms;
  // when it returns false the child is left running (and never killed by
  // this object) and nullopt is returned.
  std::optional<int> wait(const std::function<bool()>& keep_waiting = {});
  // From now on the command's status comes from `reaper` while it reaps.
  void set_reaper(CommandReaper* reaper) { reaper_ = reaper; }

 private:
  std::string command_;  // argv[0], for messages
  pid_t pid_ = -1;
  int exec_error_fd_ = -1;  // the child reports a failed exec's errno here
  bool reaped_ = false;  // or left running on purpose
  CommandReaper* reaper_ = nullptr;
};

// The shell-style exit code for a wait status: the code, or 128 + signal.
int exit_code_of(int wait_status);

}  // namespace memtrack
