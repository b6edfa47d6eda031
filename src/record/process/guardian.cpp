#include "record/process/guardian.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "record/snapshots.h"
#include "record/system_error.h"
#include "record/process/target_process.h"
#include "util/proc_text.h"

namespace memtrack {

namespace {

enum MessageKind : int32_t { kTarget = 1, kTracked, kTargetExited, kDone, kLeftFile };
struct Message {
  int32_t kind = 0;
  int32_t reserved = 0;
  int64_t value = 0;
};

const int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// Every signal the guardian handles: SIGCHLD, the forwarded ones and the
// snapshot signal (the recorder takes it with sigtimedwait).
sigset_t handled_signals() {
  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGCHLD);
  sigaddset(&handled, kSnapshotSignal);
  for (int sig : kForwardedSignals) sigaddset(&handled, sig);
  return handled;
}

// Whether any thread of `pid` is in a job-control stop.
bool has_stopped_thread(pid_t pid) {
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return false;
  bool stopped = false;
  while (dirent* ent = readdir(d)) {
    if (ent->d_name[0] == '.') continue;
    std::string text = read_proc_text(dir + "/" + ent->d_name + "/stat").value_or("");
    size_t close = text.rfind(')');
    if (close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'T') {
      stopped = true;
      break;
    }
  }
  closedir(d);
  return stopped;
}

// Signals pending for the whole process `pid` or its main thread, as a mask.
uint64_t pending_signals(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  uint64_t mask = 0;
  while (std::getline(status, line))
    if (line.rfind("ShdPnd:", 0) == 0 || line.rfind("SigPnd:", 0) == 0)
      mask |= std::strtoull(line.c_str() + 7, nullptr, 16);
  return mask;
}

// The guardian's processes are tiny: if memory runs out, the recorder goes
// first (and is then rescued).
void spare_from_oom_killer() {
  if (FILE* oom = std::fopen("/proc/self/oom_score_adj", "w")) {
    std::fputs("-1000", oom);
    std::fclose(oom);
  }
}

// A member of the job's process group that blocks every signal and takes none
// unless asked: a signal pending there was sent to the group (or to more,
// e.g. a cgroup), not to memtrack alone. Nobody signals the sentry itself.
class Sentry {
 public:
  void start() {
    int command[2], ack[2];
    if (pipe2(command, O_CLOEXEC) != 0 || pipe2(ack, O_CLOEXEC) != 0) throw system_error("pipe");
    pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) throw system_error("fork");
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(0);
      spare_from_oom_killer();
      sigset_t all;
      sigfillset(&all);
      sigprocmask(SIG_BLOCK, &all, nullptr);
      close(command[1]);
      close(ack[0]);
      int sig;
      while (read(command[0], &sig, sizeof(sig)) == sizeof(sig)) {
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        timespec zero{0, 0};
        while (sigtimedwait(&one, nullptr, &zero) == sig) {
        }
        (void)!write(ack[1], &sig, sizeof(sig));
      }
      _exit(0);
    }
    close(command[0]);
    close(ack[1]);
    command_fd_ = command[1];
    ack_fd_ = ack[0];
  }
  // In the recorder: none of this is its business.
  void forget() {
    close(command_fd_);
    close(ack_fd_);
    command_fd_ = ack_fd_ = -1;
    pid_ = -1;
  }
  // Whether `sig` is pending in the sentry; if so it is taken, so the next
  // signal is judged on its own.
  bool take(int sig) {
    if (pid_ <= 0 || !(pending_signals(pid_) & (uint64_t{1} << (sig - 1)))) return false;
    int answer;
    if (write(command_fd_, &sig, sizeof(sig)) == sizeof(sig)) (void)!read(ack_fd_, &answer, sizeof(answer));
    return true;
  }
  pid_t pid() const { return pid_; }
  ~Sentry() {
    if (command_fd_ >= 0) close(command_fd_);  // the sentry exits on EOF
    if (ack_fd_ >= 0) close(ack_fd_);
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
  }

 private:
  pid_t pid_ = -1;
  int command_fd_ = -1, ack_fd_ = -1;
};

class Guardian {
 public:
  Guardian(pid_t recorder, int socket_fd, Sentry& sentry, const std::string& output, pid_t job_pgrp)
      : recorder_(recorder), socket_fd_(socket_fd), sentry_(sentry), output_(output), job_pgrp_(job_pgrp) {
    sigset_t handled = handled_signals();
    signal_fd_ = signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
    if (signal_fd_ < 0) throw system_error("signalfd");
  }
  ~Guardian() {
    close(signal_fd_);
    if (socket_fd_ >= 0) close(socket_fd_);
    if (tracked_fd_ >= 0) close(tracked_fd_);
  }

  int run() {
    // Done ends the wait: what the recorder does after it (release its
    // probes, each close waiting for a grace period of the kernel's, and its
    // maps) concerns nobody, and memtrack need not wait for it.
    while (!recorder_status_ && !done_) wait_for_something(-1);
    read_messages();  // what the recorder said before it exited
    // Finished: memtrack's status is the one the recorder chose (the
    // command's), also when the recorder was killed on its way out after
    // saying so (its own 137 is nobody's business).
    if (done_) return done_code_;
    // Not at the socket's end when the command, stopped before its exec,
    // still holds the recorder's end of it: every message is read, remove now.
    remove_left_files();
    if (!target_) target_ = only_adopted_child();
    if (auto it = others_reaped_.find(target_); !target_status_ && it != others_reaped_.end())
      target_status_ = it->second;
    rescue();
    if (target_status_) return exit_code_of(*target_status_);
    return exit_code_of(*recorder_status_);
  }

 private:
  void wait_for_something(int timeout_ms) {
    pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {socket_fd_, POLLIN, 0}};
    int n = socket_fd_ >= 0 ? 2 : 1;
    if (poll(fds, n, timeout_ms) <= 0) return;
    if (n == 2 && fds[1].revents) read_messages();  // first: the command's pid
    if (fds[0].revents) read_signals();
  }

  void read_messages() {
    while (socket_fd_ >= 0) {
      Message m;
      char control[CMSG_SPACE(sizeof(int))];
      iovec iov{&m, sizeof(m)};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      ssize_t n = recvmsg(socket_fd_, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      if (n <= 0) {  // the recorder is gone
        close(socket_fd_);
        socket_fd_ = -1;
        remove_left_files();
        return;
      }
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      int passed_fd = -1;
      if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(&passed_fd, CMSG_DATA(c), sizeof(int));
      switch (m.kind) {
        case kTarget: target_ = static_cast<pid_t>(m.value); break;
        case kTracked:
          if (tracked_fd_ >= 0) close(tracked_fd_);
          tracked_fd_ = passed_fd;
          passed_fd = -1;
          break;
        case kTargetExited: target_status_ = static_cast<int>(m.value); break;
        case kDone:
          done_ = true;
          done_code_ = static_cast<int>(m.value);
          break;
        case kLeftFile:
          left_files_.push_back(passed_fd);
          passed_fd = -1;
          break;
        default: break;
      }
      if (passed_fd >= 0) close(passed_fd);
    }
  }

  // Removes each file the recorder named that still exists under its name
  // (a recorder that ended removed them: the name is gone, or is another
  // file's). Compared by device and inode, so nothing else is ever removed.
  void remove_left_files() {
    for (int fd : left_files_) {
      char link[32], path[PATH_MAX];
      std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
      ssize_t n = readlink(link, path, sizeof(path) - 1);
      struct stat held, named;
      if (n > 0) {
        path[n] = '\0';
        if (fstat(fd, &held) == 0 && lstat(path, &named) == 0 && held.st_dev == named.st_dev &&
            held.st_ino == named.st_ino)
          unlink(path);
      }
      close(fd);
    }
    left_files_.clear();
  }

  void read_signals() {
    signalfd_siginfo info;
    while (read(signal_fd_, &info, sizeof(info)) == sizeof(info)) {
      if (info.ssi_signo == SIGCHLD)
        reap();
      else
        forward(static_cast<int>(info.ssi_signo));
    }
  }

  void reap() {
    for (;;) {
      int status;
      pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      if (pid == recorder_)
        recorder_status_ = status;
      else if (pid == target_)
        target_status_ = status;
      else if (others_reaped_.size() < 4096)
        // An orphan of the command's tree adopted by this subreaper, or the
        // command itself before its pid was read.
        others_reaped_[pid] = status;
    }
  }

  // The recorder forks nothing but the command (and snapshots' reports, once
  // it has named the command); if it died before naming it,
  // the command (stopped before its exec, so without children yet) is the
  // one process this guardian adopted.
  pid_t only_adopted_child() {
    std::vector<pid_t> adopted;
    std::ifstream list("/proc/self/task/" + std::to_string(getpid()) + "/children");
    for (pid_t pid; list >> pid;)
      if (pid != sentry_.pid()) adopted.push_back(pid);
    for (const auto& [pid, status] : others_reaped_) adopted.push_back(pid);
    return adopted.size() == 1 ? adopted[0] : 0;
  }

  // The command would get a signal sent to the job's process group anyway;
  // anything else (kill of memtrack's pid) is passed on: to the recorder,
  // which forwards it to the command or ends an attach session, or to the
  // command itself once the recorder is gone.
  void forward(int sig) {
    usleep(2000);  // a group signal reaches every member within one kill()
    bool sent_to_group = sentry_.take(sig);
    if (sent_to_group && target_ > 0 && getpgid(target_) == job_pgrp_) return;
    // A snapshot is the recorder's to take; the command never gets it.
    if (sig == kSnapshotSignal && recorder_status_) return;
    pid_t to = !recorder_status_ ? recorder_ : target_;
    if (to > 0) kill(to, sig);
  }

  // Resumes every tracked process (and the command) that is stopped; returns
  // how many. The recorder's probes went away with it, so nothing stops them
  // again once a program that was running at its death has finished.
  size_t resume_stopped() {
    std::vector<pid_t> pids;
    if (target_ > 0) pids.push_back(target_);
    if (tracked_fd_ >= 0) {
      uint32_t key, next;
      for (uint32_t* prev = nullptr; bpf_map_get_next_key(tracked_fd_, prev, &next) == 0 && pids.size() < 1000000;
           prev = &key) {
        pids.push_back(static_cast<pid_t>(next));
        key = next;
      }
    }
    size_t resumed = 0;
    for (pid_t pid : pids)
      if (has_stopped_thread(pid) && kill(pid, SIGCONT) == 0) ++resumed;
    return resumed;
  }

  void rescue() {
    size_t resumed = resume_stopped();
    bool killed = WIFSIGNALED(*recorder_status_);
    if (killed) {
      int sig = WTERMSIG(*recorder_status_);
      std::fprintf(stderr,
                   "memtrack: the recorder (pid %d) was killed by signal %d (%s); %zu stopped process(es) resumed, "
                   "the command runs on unrecorded; %s ends with the last complete frame\n",
                   recorder_, sig, strsignal(sig), resumed, output_.c_str());
    }
    // A BPF program running when the recorder died may still stop a task:
    // look again after a grace period, and once more a second later.
    usleep(100 * 1000);
    resume_stopped();
    bool looked_again = false;
    auto last_look = std::chrono::steady_clock::now();
    while (target_ > 0 && !target_status_) {
      int status;
      pid_t r = waitpid(target_, &status, WNOHANG);
      if (r == target_) {
        target_status_ = status;
        break;
      }
      if (r < 0 && errno == ECHILD) break;  // reaped by the recorder, status unknown
      wait_for_something(200);
      if (!looked_again && std::chrono::steady_clock::now() - last_look > std::chrono::seconds(1)) {
        resume_stopped();
        looked_again = true;
      }
    }
    if (killed && target_status_)
      std::fprintf(stderr, "memtrack: the command exited with status %d\n", exit_code_of(*target_status_));
  }

  pid_t recorder_;
  int socket_fd_;
  Sentry& sentry_;
  std::string output_;
  pid_t job_pgrp_;
  int signal_fd_ = -1;
  int tracked_fd_ = -1;
  pid_t target_ = 0;
  std::optional<int> recorder_status_, target_status_;
  std::map<pid_t, int> others_reaped_;
  bool done_ = false;
  int done_code_ = 0;  // what the recorder returns, sent with kDone
  std::vector<int> left_files_;
};

}  // namespace

GuardianLink::~GuardianLink() {
  if (fd_ >= 0) close(fd_);
}

void GuardianLink::send(int kind, long value, int fd) {
  Message m;
  m.kind = kind;
  m.value = value;
  iovec iov{&m, sizeof(m)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  // A guardian that is gone cannot help; the recording goes on regardless.
  while (sendmsg(fd_, &msg, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

void GuardianLink::target_started(pid_t pid) { send(kTarget, pid); }
void GuardianLink::tracking(int tracked_pids_map_fd) { send(kTracked, 0, tracked_pids_map_fd); }
void GuardianLink::target_exited(int wait_status) { send(kTargetExited, wait_status); }
void GuardianLink::done(int exit_code) {
  if (done_sent_) return;
  done_sent_ = true;
  send(kDone, exit_code);
}
void GuardianLink::remove_if_left(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  send(kLeftFile, 0, fd);
  close(fd);
}
bool GuardianLink::guardian_gone() const { return getppid() != guardian_; }

int run_guarded(const std::string& output, const std::function<int(GuardianLink&)>& recorder) {
  pid_t job_pgrp = getpgrp();
  pid_t guardian = getpid();
  // Received through sigtimedwait (recorder) or a signalfd (guardian).
  sigset_t handled = handled_signals();
  sigprocmask(SIG_BLOCK, &handled, nullptr);
  Sentry sentry;
  sentry.start();
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets) != 0) throw system_error("socketpair");
  // Orphans of the command's tree come here rather than to init, the command
  // too if the recorder dies.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  pid_t recorder_pid = fork();
  if (recorder_pid < 0) throw system_error("fork");
  if (recorder_pid == 0) {
    close(sockets[0]);
    sentry.forget();
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    // Out of the job's process group: terminal and group signals reach the
    // guardian and the command, and the group keeps a parent outside it.
    setpgid(0, 0);
    // Writing to the terminal from outside the foreground group must not
    // stop the recorder (stty tostop).
    signal(SIGTTOU, SIG_IGN);
    GuardianLink link(sockets[1], job_pgrp, guardian);
    int code = recorder(link);
    link.done(code);
    return code;
  }
  close(sockets[1]);
  setpgid(recorder_pid, recorder_pid);
  spare_from_oom_killer();  // after the fork: not the recorder
  Guardian g(recorder_pid, sockets[0], sentry, output, job_pgrp);
  return g.run();
}

}  // namespace memtrack
