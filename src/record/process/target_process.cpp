#include "record/process/target_process.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/prctl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace memtrack {

namespace {

const int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

struct Credentials {
  bool drop = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

// Under sudo the target runs as the invoking user, not as root.
Credentials invoking_user() {
  Credentials c;
  const char* uid = std::getenv("SUDO_UID");
  const char* gid = std::getenv("SUDO_GID");
  if (getuid() != 0 || !uid || !gid) return c;
  c.drop = true;
  c.uid = static_cast<uid_t>(std::strtoul(uid, nullptr, 10));
  c.gid = static_cast<gid_t>(std::strtoul(gid, nullptr, 10));
  if (passwd* pw = getpwuid(c.uid)) {
    int n = 64;
    c.groups.resize(n);
    if (getgrouplist(pw->pw_name, c.gid, c.groups.data(), &n) < 0) {
      c.groups.resize(n);
      getgrouplist(pw->pw_name, c.gid, c.groups.data(), &n);
    }
    c.groups.resize(n);
  } else {
    c.groups = {c.gid};
  }
  return c;
}

[[noreturn]] void child_fail(int fd, int err) {
  (void)!write(fd, &err, sizeof(err));
  _exit(127);
}

}  // namespace

TargetProcess::TargetProcess(const std::vector<std::string>& argv, pid_t pgrp,
                             const std::vector<std::string>* environment) {
  if (argv.empty()) throw std::invalid_argument("no command to record");
  command_ = argv[0];
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  if (environment) {
    for (const auto& e : *environment) env.push_back(const_cast<char*>(e.c_str()));
    env.push_back(nullptr);
  }
  Credentials cred = invoking_user();

  pid_t parent = getpid();
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe: " + std::string(std::strerror(errno)));
  pid_ = fork();
  if (pid_ < 0) {
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    throw std::runtime_error("fork: " + std::string(std::strerror(errno)));
  }
  if (pid_ == 0) {
    // Only async-signal-safe calls from here on.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : kForwardedSignals) signal(sig, SIG_DFL);
    signal(SIGTTOU, SIG_DFL);  // the recorder ignores it
    if (pgrp) setpgid(0, pgrp);
    if (cred.drop && (setgroups(cred.groups.size(), cred.groups.data()) != 0 || setgid(cred.gid) != 0 ||
                      setuid(cred.uid) != 0))
      child_fail(pipe_fds[1], errno);
    // Should the recorder die while this stop lasts, the stop ends with it
    // (set after the credentials change, which clears it).
    prctl(PR_SET_PDEATHSIG, SIGCONT);
    if (getppid() == parent) raise(SIGSTOP);
    prctl(PR_SET_PDEATHSIG, 0);
    if (environment)
      execvpe(args[0], args.data(), env.data());
    else
      execvp(args[0], args.data());
    child_fail(pipe_fds[1], errno);
  }
  if (pgrp) setpgid(pid_, pgrp);  // also here: no race with the child's exec
  close(pipe_fds[1]);
  exec_error_fd_ = pipe_fds[0];
  int status;
  if (waitpid(pid_, &status, WUNTRACED) != pid_ || !WIFSTOPPED(status)) {
    reaped_ = true;
    int err = 0;
    if (read(exec_error_fd_, &err, sizeof(err)) == sizeof(err))
      throw std::runtime_error("cannot start '" + argv[0] + "': " + std::strerror(err));
    throw std::runtime_error("'" + argv[0] + "' did not start");
  }
}

TargetProcess::~TargetProcess() {
  if (exec_error_fd_ >= 0) close(exec_error_fd_);
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

void TargetProcess::resume() {
  kill(pid_, SIGCONT);
  // The pipe closes on a successful exec and carries errno otherwise.
  int err = 0;
  ssize_t n;
  do n = read(exec_error_fd_, &err, sizeof(err));
  while (n < 0 && errno == EINTR);
  close(exec_error_fd_);
  exec_error_fd_ = -1;
  if (n == sizeof(err)) {
    waitpid(pid_, nullptr, 0);
    reaped_ = true;
    throw CommandError(err, std::generic_category(), "cannot run '" + command_ + "'");
  }
}

std::optional<int> TargetProcess::wait(const std::function<bool()>& keep_waiting) {
  sigset_t wanted;
  sigemptyset(&wanted);
  sigaddset(&wanted, SIGCHLD);
  for (int sig : kForwardedSignals) sigaddset(&wanted, sig);
  sigset_t forwarded = wanted;
  sigdelset(&forwarded, SIGCHLD);
  for (;;) {
    // Asked first: once it has stopped reaping, its status is final.
    bool by_reaper = reaper_ && reaper_->reaping();
    if (std::optional<int> status = reaper_ ? reaper_->command_status() : std::nullopt) {
      reaped_ = true;
      return status;
    }
    if (!by_reaper) {
      int status;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        return status;
      }
      if (r < 0 && errno != EINTR) {
        reaped_ = true;
        return 0;
      }
    }
    if (keep_waiting && !keep_waiting()) {
      reaped_ = true;
      return std::nullopt;
    }
    siginfo_t info;
    // SIGCHLD is the reaper's; its status is looked at every 10 ms.
    timespec tick{0, (by_reaper ? 10 : 100) * 1000 * 1000};
    int sig = sigtimedwait(by_reaper ? &forwarded : &wanted, &info, &tick);
    // A terminal's Ctrl-C reaches the child through its process group; only
    // signals sent to memtrack itself are forwarded.
    if (sig > 0 && sig != SIGCHLD && info.si_code != SI_KERNEL) kill(pid_, sig);
  }
}

int exit_code_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

}  // namespace memtrack
