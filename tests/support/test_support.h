// Shared helpers for tests that run programs: a temporary directory removed
// on scope exit, child processes run in their own process group with a
// deadline (the whole group is killed on timeout or when the handle goes out
// of scope, so a failing test leaves no stopped or running process behind),
// and the privilege check for tests that load BPF programs.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace memtrack::testing {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/memtrack-test-XXXXXX";
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct SpawnOptions {
  std::string cwd;                                        // empty: inherit
  std::vector<std::pair<std::string, std::string>> env;  // set (or override) these
};

struct RunResult {
  int wait_status = 0;
  bool timed_out = false;
  std::string out, err;
  bool exited() const { return WIFEXITED(wait_status); }
  // The shell convention: the exit code, or 128 + signal.
  int exit_code() const {
    if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
    return -1;
  }
  std::string describe() const {
    std::ostringstream s;
    if (timed_out) s << "TIMED OUT (process group killed); ";
    if (WIFEXITED(wait_status))
      s << "exit code " << WEXITSTATUS(wait_status);
    else if (WIFSIGNALED(wait_status))
      s << "killed by signal " << WTERMSIG(wait_status);
    else
      s << "wait status " << wait_status;
    s << "\n--- stderr ---\n" << err << "\n--- stdout (" << out.size() << " bytes) ---\n"
      << out.substr(0, 4000) << (out.size() > 4000 ? "\n[...]" : "");
    return s.str();
  }
};

// A child process in its own process group, its stdout and stderr captured
// through pipes, stdin from /dev/null.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const SpawnOptions& options = {}) {
    if (argv.empty()) throw std::invalid_argument("empty argv");
    // Everything the child needs is prepared before fork: after it, only
    // async-signal-safe calls.
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) {
      std::string entry = *e;
      bool overridden = false;
      for (const auto& [k, v] : options.env)
        if (entry.compare(0, k.size() + 1, k + "=") == 0) overridden = true;
      if (!overridden) env_strings.push_back(entry);
    }
    for (const auto& [k, v] : options.env) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp, args;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_copy = argv;
    for (auto& a : argv_copy) args.push_back(a.data());
    args.push_back(nullptr);
    const char* cwd = options.cwd.empty() ? nullptr : options.cwd.c_str();

    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    if (pipe2(err_pipe, O_CLOEXEC) != 0) {
      close(out_pipe[0]);
      close(out_pipe[1]);
      throw std::runtime_error("pipe failed");
    }
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      setpgid(0, 0);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD, SIGUSR1}) signal(s, SIG_DFL);
      int devnull = open("/dev/null", O_RDONLY);
      if (devnull >= 0) dup2(devnull, STDIN_FILENO);
      dup2(out_pipe[1], STDOUT_FILENO);
      dup2(err_pipe[1], STDERR_FILENO);
      if (cwd && chdir(cwd) != 0) _exit(126);
      execve(args[0], args.data(), envp.data());
      static const char msg[] = "test support: execve failed\n";
      (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
      _exit(127);
    }
    setpgid(pid_, pid_);  // also here: no race with a kill of the group
    close(out_pipe[1]);
    close(err_pipe[1]);
    out_fd_ = out_pipe[0];
    err_fd_ = err_pipe[0];
  }
  ~Child() {
    if (!reaped_) {
      kill_group();
      int status;
      waitpid(pid_, &status, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
    if (err_fd_ >= 0) close(err_fd_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

  // SIGKILL to the whole process group (SIGCONT first: a stopped group too).
  void kill_group() {
    kill(-pid_, SIGKILL);
    kill(-pid_, SIGCONT);
  }

  // Reads output until `needle` appears in stdout (or stderr) or the deadline
  // passes. Returns whether it appeared.
  bool wait_for_stdout(const std::string& needle, std::chrono::milliseconds timeout) {
    return wait_for(out_, needle, timeout);
  }
  bool wait_for_stderr(const std::string& needle, std::chrono::milliseconds timeout) {
    return wait_for(err_, needle, timeout);
  }
  // Until stderr holds `needle` `count` times.
  bool wait_for_stderr_times(const std::string& needle, size_t count, std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    for (;;) {
      size_t found = 0;
      for (size_t at = err_.find(needle); at != std::string::npos; at = err_.find(needle, at + needle.size())) ++found;
      if (found >= count) return true;
      if ((out_fd_ < 0 && err_fd_ < 0) || Clock::now() >= deadline) return false;
      pump(deadline);
    }
  }

  // Waits for the exit (and for the pipes to close); kills the group when the
  // deadline passes.
  RunResult finish(std::chrono::milliseconds timeout) {
    RunResult r;
    auto deadline = Clock::now() + timeout;
    while ((out_fd_ >= 0 || err_fd_ >= 0) && Clock::now() < deadline) pump(deadline);
    if (reaped_) r.wait_status = final_status_;
    while (!reaped_) {
      int status = 0;
      pid_t w = waitpid(pid_, &status, WNOHANG);
      if (w == pid_) {
        reaped_ = true;
        final_status_ = r.wait_status = status;
        break;
      }
      if (Clock::now() >= deadline) {
        r.timed_out = true;
        kill_group();
        waitpid(pid_, &status, 0);
        reaped_ = true;
        final_status_ = r.wait_status = status;
        break;
      }
      std::this_thread::sleep_for(5ms);
    }
    if (r.timed_out) {
      // Collect what is left without blocking on pipes a stray process holds.
      auto grace = Clock::now() + 500ms;
      while ((out_fd_ >= 0 || err_fd_ >= 0) && Clock::now() < grace) pump(grace);
    }
    r.out = out_;
    r.err = err_;
    return r;
  }

  // Whether the process has exited (reaps it). Never blocks.
  bool exited_now(int* status_out = nullptr) {
    if (reaped_) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      final_status_ = status;
    }
    if (reaped_ && status_out) *status_out = final_status_;
    return reaped_;
  }

 private:
  bool wait_for(const std::string& buffer, const std::string& needle, std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    for (;;) {
      if (buffer.find(needle) != std::string::npos) return true;
      if ((out_fd_ < 0 && err_fd_ < 0) || Clock::now() >= deadline) return false;
      pump(deadline);
    }
  }

  // One poll round over the open pipes.
  void pump(Clock::time_point deadline) {
    pollfd fds[2];
    int n = 0;
    if (out_fd_ >= 0) fds[n++] = {out_fd_, POLLIN, 0};
    if (err_fd_ >= 0) fds[n++] = {err_fd_, POLLIN, 0};
    if (n == 0) return;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    int wait_ms = static_cast<int>(std::clamp<long long>(left, 0, 100));
    if (poll(fds, n, wait_ms) <= 0) return;
    for (int i = 0; i < n; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      int* fd = fds[i].fd == out_fd_ ? &out_fd_ : &err_fd_;
      std::string& buf = fds[i].fd == out_fd_ ? out_ : err_;
      char chunk[65536];
      ssize_t got = read(*fd, chunk, sizeof(chunk));
      if (got > 0) {
        buf.append(chunk, static_cast<size_t>(got));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        close(*fd);
        *fd = -1;
      }
    }
  }

  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  bool reaped_ = false;
  int final_status_ = 0;
  std::string out_, err_;
};

inline RunResult run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                             const SpawnOptions& options = {}) {
  Child child(argv, options);
  return child.finish(timeout);
}

// Root, or CAP_BPF (39) and CAP_PERFMON (38) effective.
inline bool have_bpf_privileges() {
  if (geteuid() == 0) return true;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    unsigned long long caps = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (caps >> 39 & 1) && (caps >> 38 & 1);
  }
  return false;
}

inline const char* kNoPrivilegesMessage =
    "\n*****************************************************************\n"
    "*** SKIPPED: memtrack record needs root or CAP_BPF+CAP_PERFMON. ***\n"
    "*** These integration tests did NOT run. Run them as root.      ***\n"
    "*****************************************************************\n";

}  // namespace memtrack::testing

// Skips the current test loudly when BPF programs cannot be loaded.
#define MEMTRACK_REQUIRE_BPF_PRIVILEGES()                                              \
  do {                                                                                 \
    if (!::memtrack::testing::have_bpf_privileges()) {                                 \
      std::fputs(::memtrack::testing::kNoPrivilegesMessage, stderr);                   \
      GTEST_SKIP() << ::memtrack::testing::kNoPrivilegesMessage;                       \
    }                                                                                  \
  } while (0)
