#include "record/process/ptrace_hold.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <stdexcept>

#include "record/process/proc_fs.h"
#include "record/process/ptrace_tasks.h"

namespace memtrack {

PtraceHold::PtraceHold(pid_t command, bool hold_children) : command_(command), hold_children_(hold_children) {
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  // ptrace requests must come from the thread that seized: that thread does
  // all the tracing and is the only one to wait for the command.
  std::promise<std::string> seized;
  std::future<std::string> result = seized.get_future();
  thread_ = std::thread([this, &seized] {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &chld, nullptr);
    // (A thread other than the leader that execs takes the leader's tid; its
    // own tid is dropped when an interrupt finds it gone.)
    if (ptrace(PTRACE_SEIZE, command_, 0, kTraceNewTasks) != 0) {
      seized.set_value(std::strerror(errno));
      return;
    }
    task(command_, command_).started = true;
    int signal_fd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    seized.set_value("");
    run(signal_fd);
    close(signal_fd);
  });
  std::string error = result.get();
  if (!error.empty()) {
    thread_.join();
    close(wake_fd_);
    stopped_ = true;
    throw std::runtime_error("cannot trace the command (PTRACE_SEIZE: " + error + ")");
  }
}

PtraceHold::~PtraceHold() {
  stop();
  close(wake_fd_);
}

void PtraceHold::release(pid_t tgid) {
  {
    std::lock_guard lock(mutex_);
    if (!detached_) {
      releases_.push_back(tgid);
      uint64_t one = 1;
      (void)!write(wake_fd_, &one, sizeof(one));
      return;
    }
  }
  kill(tgid, SIGCONT);
}

void PtraceHold::stop() {
  {
    std::lock_guard lock(mutex_);
    if (detached_ || !thread_.joinable()) return;
    stop_requested_ = true;
  }
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  thread_.join();
  std::vector<pid_t> leftover;
  {
    std::lock_guard lock(mutex_);
    detached_ = true;
    leftover.swap(releases_);
  }
  stopped_ = true;
  // Untraced now: a SIGSTOP still pending for them would be a group stop.
  for (pid_t tgid : leftover) kill(tgid, SIGCONT);
}

std::optional<int> PtraceHold::command_status() {
  std::lock_guard lock(mutex_);
  return command_status_;
}

std::map<std::string, uint64_t> PtraceHold::counters() const {
  return {
      {"ptrace_holds", holds_.load()},
      {"ptrace_early_releases", early_releases_.load()},
      {"ptrace_stale_releases", stale_releases_.load()},
      {"ptrace_tasks_traced", tasks_traced_.load()},
      {"ptrace_signals_passed", signals_passed_.load()},
      {"ptrace_stops_handled", stops_handled_.load()},
      {"ptrace_holds_expired", holds_expired_.load()},
  };
}

void PtraceHold::run(int signal_fd) {
  for (;;) {
    drain_stops();
    std::vector<pid_t> releases;
    bool stopping;
    {
      std::lock_guard lock(mutex_);
      releases.swap(releases_);
      stopping = stop_requested_;
    }
    for (pid_t tgid : releases) handle_release(tgid);
    if (stopping) break;
    expire_holds();
    pollfd fds[2] = {{signal_fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, 1000) < 0 && errno != EINTR) break;
    signalfd_siginfo info;
    while (read(signal_fd, &info, sizeof(info)) == sizeof(info)) {
    }
    uint64_t count;
    (void)!read(wake_fd_, &count, sizeof(count));
  }
  std::vector<pid_t> released_early = detach_all();
  for (pid_t tgid : released_early) kill(tgid, SIGCONT);
}

void PtraceHold::drain_stops() {
  for (;;) {
    int status;
    pid_t tid = waitpid(-1, &status, __WALL | WNOHANG);
    if (tid <= 0) return;
    ++stops_handled_;
    if (WIFSTOPPED(status))
      on_stop(tid, status);
    else
      on_gone(tid, status);
  }
}

PtraceHold::Task& PtraceHold::task(pid_t tid, pid_t tgid_hint) {
  auto it = tasks_.find(tid);
  if (it != tasks_.end()) return it->second;
  pid_t tgid = tgid_hint;
  if (!tgid) tgid = static_cast<pid_t>(std::atoi(status_field(tid, "Tgid:").c_str()));
  if (tgid <= 0) tgid = tid;
  Task& t = tasks_[tid];
  t.tgid = tgid;
  processes_[tgid].tids.insert(tid);
  ++tasks_traced_;
  return t;
}

void PtraceHold::on_gone(pid_t tid, int status) {
  if (tid == command_) {
    std::lock_guard lock(mutex_);
    command_status_ = status;
  }
  auto it = tasks_.find(tid);
  if (it == tasks_.end()) return;
  auto process = processes_.find(it->second.tgid);
  if (process != processes_.end()) {
    process->second.tids.erase(tid);
    if (process->second.tids.empty()) processes_.erase(process);
  }
  tasks_.erase(it);
}

void PtraceHold::on_stop(pid_t tid, int status) {
  Task& t = task(tid);
  bool first_stop = !t.started;
  t.started = true;
  t.stopped = true;
  t.group_stop = false;
  int sig = WSTOPSIG(status);
  int event = status >> 16;
  unsigned long message = 0;
  switch (event) {
    case PTRACE_EVENT_FORK:
    case PTRACE_EVENT_VFORK:
    case PTRACE_EVENT_CLONE:
      // The new task is traced already; it reports its own first stop.
      if (ptrace(PTRACE_GETEVENTMSG, tid, 0, &message) == 0) {
        auto child = static_cast<pid_t>(message);
        std::string thread = "/proc/" + std::to_string(t.tgid) + "/task/" + std::to_string(child);
        bool same_process = event == PTRACE_EVENT_CLONE && access(thread.c_str(), F_OK) == 0;
        task(child, same_process ? t.tgid : child);
      }
      break;
    case PTRACE_EVENT_STOP:
      // An interrupt, a new task's first stop, or (with a stop signal) a
      // group stop the command's own job control asked for.
      t.interrupted = false;
      t.group_stop = is_stop_signal(sig);
      if (first_stop && hold_children_ && tid == t.tgid) {  // a new process
        Process& process = processes_[t.tgid];
        if (process.released_early)
          process.released_early = false;
        else
          hold(t.tgid);
      }
      break;
    case 0: {  // signal-delivery-stop
      siginfo_t info;
      if (sig == SIGSTOP && ptrace(PTRACE_GETSIGINFO, tid, 0, &info) == 0 && info.si_code == SI_KERNEL) {
        // memtrack's stop (bpf_send_signal): suppressed, and held unless its
        // release came first.
        Process& process = processes_[t.tgid];
        t.stopped = false;
        if (process.released_early) {
          process.released_early = false;
          ptrace(PTRACE_CONT, tid, 0, 0);
          return;
        }
        hold(t.tgid);
        // Held in a PTRACE_EVENT_STOP rather than here: if the tracer dies,
        // a task in this stop would get its SIGSTOP after all.
        if (!t.interrupted && ptrace(PTRACE_INTERRUPT, tid, 0, 0) == 0) t.interrupted = true;
        ptrace(PTRACE_CONT, tid, 0, 0);
        return;
      }
      ++signals_passed_;
      t.inject = sig;
      break;
    }
    default: break;
  }
  park_or_resume(tid);
}

void PtraceHold::hold(pid_t tgid) {
  Process& process = processes_[tgid];
  if (!process.held) {
    ++holds_;
    process.held_since = std::chrono::steady_clock::now();
  }
  process.held = true;
  // A group stop stops every thread: so does a hold.
  std::vector<pid_t> gone;
  for (pid_t tid : process.tids) {
    Task& other = tasks_[tid];
    if (other.stopped || other.interrupted) continue;
    if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) == 0)
      other.interrupted = true;
    else if (errno == ESRCH && tid != tgid)
      gone.push_back(tid);  // a thread that exec'd as the leader
  }
  for (pid_t tid : gone) on_gone(tid, 0);
}

void PtraceHold::park_or_resume(pid_t tid) {
  Task& t = tasks_[tid];
  auto process = processes_.find(t.tgid);
  if (process != processes_.end() && process->second.held)
    t.stopped = true;
  else
    resume(tid);
}

void PtraceHold::resume(pid_t tid) {
  Task& t = tasks_[tid];
  t.stopped = false;
  // A task in a group stop stays stopped until SIGCONT, as untraced.
  if (t.group_stop)
    ptrace(PTRACE_LISTEN, tid, 0, 0);
  else
    ptrace(PTRACE_CONT, tid, 0, t.inject);
  t.inject = 0;
}

void PtraceHold::expire_holds() {
  // Far longer than any probe attachment or rule learning takes.
  constexpr auto kLongestHold = std::chrono::seconds(10);
  auto now = std::chrono::steady_clock::now();
  std::vector<pid_t> expired;
  for (const auto& [tgid, process] : processes_)
    if (process.held && now - process.held_since > kLongestHold) expired.push_back(tgid);
  for (pid_t tgid : expired) {
    ++holds_expired_;
    handle_release(tgid);
  }
}

bool PtraceHold::sigstop_pending(pid_t tgid) const {
  std::string mask = status_field(tgid, "ShdPnd:");
  return !mask.empty() && (std::strtoull(mask.c_str(), nullptr, 16) & (1ull << (SIGSTOP - 1)));
}

void PtraceHold::handle_release(pid_t tgid) {
  auto release_held = [&]() {
    auto process = processes_.find(tgid);
    if (process == processes_.end() || !process->second.held) return false;
    process->second.held = false;
    for (pid_t tid : process->second.tids)
      if (tasks_[tid].stopped) resume(tid);
    return true;
  };
  if (release_held()) return;
  // A new process whose first stop is not seen yet (its Fork record is out
  // first): that stop is the hold this release ends.
  auto process = processes_.find(tgid);
  bool started = false;
  if (process != processes_.end())
    for (pid_t tid : process->second.tids) started |= tasks_[tid].started;
  if (hold_children_ && !started) {
    processes_[tgid].released_early = true;
    ++early_releases_;
    return;
  }
  // Not held yet: its SIGSTOP is still pending (the release came first; the
  // stop is then cancelled when taken), or was just taken and its stop is
  // not seen yet, or was merged with another and this release is spare.
  if (sigstop_pending(tgid)) {
    processes_[tgid].released_early = true;
    ++early_releases_;
    return;
  }
  drain_stops();
  if (!release_held()) ++stale_releases_;
}

std::vector<pid_t> PtraceHold::detach_all() {
  drain_stops();
  std::vector<pid_t> released_early;
  for (auto& [tgid, process] : processes_) {
    process.held = false;
    if (process.released_early && !process.tids.empty()) released_early.push_back(tgid);
  }
  // Tasks left running are detached when this thread ends.
  for (auto& [tid, t] : tasks_)
    if (t.stopped) ptrace(PTRACE_DETACH, tid, 0, t.group_stop ? 0 : t.inject);
  tasks_.clear();
  processes_.clear();
  return released_early;
}

}  // namespace memtrack
