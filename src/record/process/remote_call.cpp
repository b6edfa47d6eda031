#include "record/process/remote_call.h"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include "module/elf_file.h"
#include "record/process/proc_fs.h"
#include "record/process/ptrace_tasks.h"
#include "util/proc_text.h"

namespace memtrack {

namespace {

#if !defined(__x86_64__)
#error "remote_call.cpp makes x86-64 calls"
#endif

using Clock = std::chrono::steady_clock;

constexpr uint8_t kBreakpoint = 0xcc;
constexpr int kRtldNow = 2;

// What a system call a stop interrupted returns: the kernel's codes for one
// that runs again once the thread resumes (ERESTARTSYS, ERESTARTNOINTR,
// ERESTARTNOHAND, ERESTART_RESTARTBLOCK), or EINTR (sigtimedwait,
// epoll_wait: the program sees that of any tracer's stop).
bool interrupted_in_call(long long rax) {
  return rax == -512 || rax == -513 || rax == -514 || rax == -516 || rax == -EINTR;
}

std::string trimmed(std::string s) {
  s.erase(0, s.find_first_not_of(" \t"));
  s.erase(s.find_last_not_of(" \t\n") + 1);
  return s;
}

std::string comm_of(pid_t pid) { return trimmed(read_proc_text("/proc/" + std::to_string(pid) + "/comm").value_or("?")); }

bool has_ptrace_capability() {
  std::string caps = trimmed(status_field(getpid(), "CapEff:"));
  return !caps.empty() && (std::stoull(caps, nullptr, 16) >> 19 & 1);  // CAP_SYS_PTRACE
}

// Why PTRACE_SEIZE failed with `error`, as precisely as /proc tells.
std::string why_refused(pid_t pid, int error) {
  std::string tracer = trimmed(status_field(pid, "TracerPid:"));
  if (!tracer.empty() && tracer != "0")
    return "pid " + std::to_string(pid) + " is already traced by pid " + tracer + " (" + comm_of(std::stoi(tracer)) +
           "), and a process has one tracer";
  if (std::optional<std::string> scope = read_proc_text("/proc/sys/kernel/yama/ptrace_scope")) {
    int level = std::atoi(scope->c_str());
    if (level == 3) return "Yama's ptrace_scope is 3 (/proc/sys/kernel/yama/ptrace_scope): no process may be traced";
    if (level >= 1 && !has_ptrace_capability())
      return "Yama's ptrace_scope is " + std::to_string(level) +
             " (/proc/sys/kernel/yama/ptrace_scope) and memtrack lacks CAP_SYS_PTRACE";
  }
  if (trimmed(status_field(getpid(), "Seccomp:")) == "2")
    return std::string("ptrace: ") + std::strerror(error) + " (memtrack runs under a seccomp filter)";
  return std::string("ptrace: ") + std::strerror(error);
}

std::vector<pid_t> threads_of(pid_t pid) {
  std::vector<pid_t> tids;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') tids.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
    closedir(d);
  }
  return tids;
}

std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

bool is_libc(const MapEntry& m) {
  std::string name = base_name(m.path);
  return name.starts_with("libc.so") || (name.starts_with("libc-") && name.ends_with(".so"));
}

// Where `file_offset` of the file mapped by the entries `same_file` accepts
// is in the process; 0 when no mapping holds it.
template <typename SameFile>
uint64_t address_in(const std::vector<MapEntry>& maps, SameFile same_file, uint64_t file_offset) {
  for (const MapEntry& m : maps)
    if (same_file(m) && file_offset >= m.offset && file_offset < m.offset + (m.end - m.start))
      return m.start + (file_offset - m.offset);
  return 0;
}

void sleep_briefly() {
  timespec pause{0, 200 * 1000};
  nanosleep(&pause, nullptr);
}

// The threads of one process while seized: each stopped or running, what it
// stopped with, the breakpoints in place.
class Tracer {
 public:
  explicit Tracer(pid_t pid) : pid_(pid) {
    for (bool found = true; found;) {  // until a pass finds no thread it has not seized
      found = false;
      for (pid_t tid : threads_of(pid)) {
        if (threads_.count(tid)) continue;
        if (ptrace(PTRACE_SEIZE, tid, 0, kTraceNewTasks) != 0) {
          if (errno == ESRCH) continue;  // exited meanwhile
          int error = errno;
          detach_all();
          throw RemoteCallRefused(why_refused(pid, error));
        }
        threads_[tid] = {};
        found = true;
      }
    }
    if (threads_.empty()) throw RemoteCallRefused("no process " + std::to_string(pid));
    mem_fd_ = open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDWR | O_CLOEXEC);
    if (mem_fd_ < 0) {
      int error = errno;
      detach_all();
      throw RemoteCallRefused("/proc/" + std::to_string(pid) + "/mem: " + std::strerror(error));
    }
  }

  ~Tracer() {
    detach_all();
    if (mem_fd_ >= 0) close(mem_fd_);
  }
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // Every thread stopped (new ones included); false when some did not stop
  // in time.
  bool stop_all(Clock::time_point deadline) {
    for (auto& [tid, t] : threads_)
      if (!t.stopped && !t.interrupted && ptrace(PTRACE_INTERRUPT, tid, 0, 0) == 0) t.interrupted = true;
    for (;;) {
      bool all = true;
      for (auto& [tid, t] : threads_) {
        if (!t.stopped && !t.interrupted && ptrace(PTRACE_INTERRUPT, tid, 0, 0) == 0) t.interrupted = true;
        all = all && t.stopped;
      }
      if (all) return true;
      if (!wait_event(deadline)) return false;
    }
  }

  // A thread blocked in a system call that waits (for input, time, a child,
  // a signal, a futex outside glibc's and the loader's own data), where it
  // holds no lock dlopen needs; 0 when none.
  pid_t thread_waiting_safely(const std::vector<MapEntry>& maps) {
    for (auto& [tid, t] : threads_) {
      user_regs_struct r;
      if (!t.stopped || t.group_stop || ptrace(PTRACE_GETREGS, tid, 0, &r) != 0) continue;
      if (static_cast<long long>(r.orig_rax) < 0 || !interrupted_in_call(static_cast<long long>(r.rax))) continue;
      if (waits_safely(r, maps)) return tid;
    }
    return 0;
  }

  // A thread stopped in the program's own code: not in glibc or the loader
  // (whose locks dlopen takes), nor in a module that defines malloc (another
  // allocator's locks), nor, as far as its signal mask tells, in a signal
  // handler (which may have interrupted malloc: a handled signal is blocked
  // while its handler runs); 0 when none.
  pid_t thread_in_program_code(const std::vector<MapEntry>& maps) {
    std::string caught = trimmed(status_field(pid_, "SigCgt:"));
    uint64_t handled = caught.empty() ? ~uint64_t{0} : std::strtoull(caught.c_str(), nullptr, 16);
    for (auto& [tid, t] : threads_) {
      user_regs_struct r;
      if (!t.stopped || t.group_stop || t.signal || ptrace(PTRACE_GETREGS, tid, 0, &r) != 0) continue;
      if (static_cast<long long>(r.orig_rax) >= 0) continue;  // in a system call
      uint64_t blocked = std::strtoull(trimmed(status_field(tid, "SigBlk:")).c_str(), nullptr, 16);
      if (blocked & handled) continue;
      for (const MapEntry& m : maps)
        if (m.contains(r.rip) && m.executable()) {
          if (m.path == "[vdso]" || (m.ino != 0 && !is_libc(m) && !base_name(m.path).starts_with("ld-") &&
                                      !defines_malloc(m)))
            return tid;
          break;
        }
    }
    return 0;
  }

  // The first thread to reach one of `entries` (breakpoints) within `wait`,
  // stopped there with every other thread stopped too and the breakpoints
  // gone; 0 when none did.
  pid_t first_to_reach(const std::vector<uint64_t>& entries, std::chrono::milliseconds wait) {
    for (uint64_t address : entries) {
      uint8_t original = 0;
      if (pread(mem_fd_, &original, 1, static_cast<off_t>(address)) != 1) continue;
      if (pwrite(mem_fd_, &kBreakpoint, 1, static_cast<off_t>(address)) != 1) continue;
      breakpoints_.push_back({address, original});
    }
    pid_t chosen = 0;
    for (auto& [tid, t] : threads_) resume(tid, t);
    auto deadline = Clock::now() + wait;
    while (!chosen) {
      std::optional<pid_t> tid = wait_event(deadline);
      if (!tid) break;
      auto it = threads_.find(*tid);
      if (it == threads_.end() || !it->second.stopped) continue;
      if (at_breakpoint(*tid, it->second))
        chosen = *tid;
      else
        resume(*tid, it->second);
    }
    stop_all(Clock::now() + std::chrono::seconds(1));
    remove_breakpoints();
    return threads_.count(chosen) ? chosen : 0;
  }

  // Detaches every thread but `tid`, which stays stopped.
  void detach_all_but(pid_t tid) {
    std::vector<pid_t> others;
    for (const auto& [other, t] : threads_)
      if (other != tid) others.push_back(other);
    for (pid_t other : others) {
      auto it = threads_.find(other);
      if (it == threads_.end()) continue;
      detach(other, it->second);
      threads_.erase(other);
    }
    ptrace(PTRACE_SETOPTIONS, tid, 0, 0);  // its new threads and children run untraced
  }

  // Calls `function`(arguments) in the stopped thread `tid` from registers
  // `saved`, the other threads running; returns rax. The thread stays
  // stopped with its registers changed: restore() puts them back.
  uint64_t call(pid_t tid, const user_regs_struct& saved, uint64_t function, const std::vector<uint64_t>& arguments,
                Clock::time_point deadline) {
    user_regs_struct r = saved;
    // Below the red zone, 16-byte aligned once the return address is pushed.
    r.rsp = ((saved.rsp - 512) & ~uint64_t{15}) - 8;
    uint64_t return_address = 0;  // returning faults at 0: the call is over
    write_memory(r.rsp, &return_address, sizeof(return_address));
    r.rip = function;
    static constexpr std::array<unsigned long long user_regs_struct::*, 2> kArgs = {&user_regs_struct::rdi,
                                                                                  &user_regs_struct::rsi};
    for (size_t i = 0; i < arguments.size() && i < kArgs.size(); ++i) r.*kArgs[i] = arguments[i];
    r.rax = 0;
    r.orig_rax = static_cast<unsigned long long>(-1);  // no system call to restart during the call
    Thread& t = threads_.at(tid);
    if (ptrace(PTRACE_SETREGS, tid, 0, &r) != 0) throw std::runtime_error(std::string("PTRACE_SETREGS: ") + std::strerror(errno));
    t.signal = 0;
    resume(tid, t);
    for (;;) {
      std::optional<pid_t> stopped = wait_event(deadline);
      if (!stopped) throw std::runtime_error("the call did not return within its time");
      if (!threads_.count(tid)) throw std::runtime_error("the thread exited during the call");
      if (*stopped != tid || !t.stopped) continue;
      user_regs_struct now;
      if (t.signal == SIGSEGV && ptrace(PTRACE_GETREGS, tid, 0, &now) == 0 && now.rip == 0) {
        t.signal = 0;
        return now.rax;
      }
      if (t.signal == SIGSEGV || t.signal == SIGBUS || t.signal == SIGILL)
        throw std::runtime_error("the call faulted (" + std::string(strsignal(t.signal)) + ")");
      resume(tid, t);  // any other signal is the program's: delivered, its handler runs on our frame
    }
  }

  // Bytes written to the stack below the thread's frame, for the call.
  uint64_t push_string(uint64_t& top, const std::string& s) {
    top = (top - (s.size() + 1 + 15)) & ~uint64_t{15};
    write_memory(top, s.c_str(), s.size() + 1);
    return top;
  }

  std::string read_string(uint64_t address) {
    std::array<char, 512> buffer{};
    ssize_t got = pread(mem_fd_, buffer.data(), buffer.size() - 1, static_cast<off_t>(address));
    return got > 0 ? std::string(buffer.data(), strnlen(buffer.data(), static_cast<size_t>(got))) : "?";
  }

  void write_memory(uint64_t address, const void* data, size_t size) {
    if (pwrite(mem_fd_, data, size, static_cast<off_t>(address)) != static_cast<ssize_t>(size))
      throw std::runtime_error("cannot write the process's stack: " + std::string(std::strerror(errno)));
  }

 private:
  struct Thread {
    bool stopped = false;
    bool interrupted = false;  // asked to stop
    bool group_stop = false;   // a job-control stop: it stays in it when resumed
    int signal = 0;            // the signal it stopped to receive: delivered when it resumes
  };
  struct Breakpoint {
    uint64_t address;
    uint8_t original;
  };

  bool waits_safely(const user_regs_struct& r, const std::vector<MapEntry>& maps) const {
    switch (r.orig_rax) {
      case SYS_read: case SYS_readv: case SYS_poll: case SYS_ppoll: case SYS_select: case SYS_pselect6:
      case SYS_epoll_wait: case SYS_epoll_pwait: case SYS_pause: case SYS_nanosleep: case SYS_clock_nanosleep:
      case SYS_wait4: case SYS_waitid: case SYS_rt_sigsuspend: case SYS_rt_sigtimedwait: case SYS_accept:
      case SYS_accept4: case SYS_recvfrom: case SYS_recvmsg: case SYS_msgrcv: case SYS_semop:
        return true;
      case SYS_futex: {
        int op = static_cast<int>(r.rsi) & 127;  // without FUTEX_PRIVATE_FLAG, FUTEX_CLOCK_REALTIME
        if (op != 0 && op != 9) return false;    // FUTEX_WAIT, FUTEX_WAIT_BITSET
        uint64_t word = r.rdi;
        // A malloc arena's lock heads a 64 MiB-aligned heap; glibc's others
        // and the loader's are in their data.
        if ((word & ((uint64_t{64} << 20) - 1)) < 4096) return false;
        for (const MapEntry& m : maps)
          if (m.contains(word)) return !is_libc(m) && !base_name(m.path).starts_with("ld-");
        return false;
      }
      default:
        return false;
    }
  }

  bool defines_malloc(const MapEntry& m) {
    auto [it, added] = defines_malloc_.try_emplace({m.kernel_dev(), m.ino}, true);
    if (added) {
      char file[96];
      std::snprintf(file, sizeof(file), "/proc/%d/map_files/%lx-%lx", pid_, static_cast<unsigned long>(m.start),
                    static_cast<unsigned long>(m.end));
      try {
        it->second = ElfFile(file).dynamic_symbol_offset("malloc").has_value();
      } catch (const std::exception&) {
        // Unreadable: taken for an allocator.
      }
    }
    return it->second;
  }

  bool at_breakpoint(pid_t tid, Thread& t) {
    if (t.signal != SIGTRAP) return false;
    user_regs_struct r;
    if (ptrace(PTRACE_GETREGS, tid, 0, &r) != 0) return false;
    for (const Breakpoint& b : breakpoints_)
      if (r.rip == b.address + 1) return true;
    return false;
  }

  // The original bytes back; a thread that executed a breakpoint meanwhile
  // goes back to its address and its SIGTRAP is dropped (delivered, it would
  // kill the process). Every thread is stopped.
  void remove_breakpoints() {
    for (const Breakpoint& b : breakpoints_) pwrite(mem_fd_, &b.original, 1, static_cast<off_t>(b.address));
    auto deadline = Clock::now() + std::chrono::seconds(1);
    std::vector<pid_t> tids;
    for (const auto& [tid, t] : threads_) tids.push_back(tid);
    for (pid_t tid : tids) {
      user_regs_struct r;
      auto it = threads_.find(tid);
      if (it == threads_.end() || !it->second.stopped || ptrace(PTRACE_GETREGS, tid, 0, &r) != 0) continue;
      bool trapped = false;
      for (const Breakpoint& b : breakpoints_) trapped = trapped || r.rip == b.address + 1;
      if (!trapped) continue;
      if (it->second.signal != SIGTRAP) {
        // Stopped before its SIGTRAP was delivered (an interrupt comes
        // first): resumed, it stops again to receive it.
        uint64_t pending = std::strtoull(trimmed(status_field(tid, "SigPnd:")).c_str(), nullptr, 16);
        if (!(pending >> (SIGTRAP - 1) & 1)) continue;
        resume(tid, it->second);
        while ((it = threads_.find(tid)) != threads_.end() && !it->second.stopped && wait_event(deadline)) {
        }
        if (it == threads_.end() || it->second.signal != SIGTRAP) continue;
      }
      it->second.signal = 0;
      r.rip -= 1;
      ptrace(PTRACE_SETREGS, tid, 0, &r);
    }
    breakpoints_.clear();
  }

  void resume(pid_t tid, Thread& t) {
    if (t.group_stop)
      ptrace(PTRACE_LISTEN, tid, 0, 0);
    else
      ptrace(PTRACE_CONT, tid, 0, t.signal);
    t.stopped = t.interrupted = false;
    t.signal = 0;
  }

  void detach(pid_t tid, Thread& thread) {
    auto it = threads_.find(tid);
    if (!thread.stopped) {
      if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0) return;
      auto deadline = Clock::now() + std::chrono::seconds(1);
      while ((it = threads_.find(tid)) != threads_.end() && !it->second.stopped && wait_event(deadline)) {
      }
      if (it == threads_.end() || !it->second.stopped) return;
    }
    ptrace(PTRACE_DETACH, tid, 0, it->second.group_stop ? 0 : it->second.signal);
  }

  void detach_all() {
    if (!breakpoints_.empty()) {
      stop_all(Clock::now() + std::chrono::seconds(1));
      remove_breakpoints();
    }
    while (!threads_.empty()) {
      pid_t tid = threads_.begin()->first;
      detach(tid, threads_.begin()->second);
      threads_.erase(tid);
    }
  }

  // A child forked or vforked while traced: its original bytes back where
  // breakpoints are (a vfork child shares the memory: they are gone for
  // both), then it runs untraced.
  void release_child(pid_t child) {
    int status;
    if (waitpid(child, &status, __WALL) != child || !WIFSTOPPED(status)) return;
    if (!breakpoints_.empty()) {
      int fd = open(("/proc/" + std::to_string(child) + "/mem").c_str(), O_RDWR | O_CLOEXEC);
      for (const Breakpoint& b : breakpoints_)
        if (fd >= 0) pwrite(fd, &b.original, 1, static_cast<off_t>(b.address));
      if (fd >= 0) close(fd);
    }
    ptrace(PTRACE_DETACH, child, 0, 0);
  }

  // Waits for the next stop or exit of a traced thread and notes it;
  // returns its tid, nullopt at the deadline (or with nothing traced).
  std::optional<pid_t> wait_event(Clock::time_point deadline) {
    for (;;) {
      int status = 0;
      pid_t tid = waitpid(-1, &status, __WALL | WNOHANG);
      if (tid < 0) return std::nullopt;
      if (tid == 0) {
        if (Clock::now() >= deadline) return std::nullopt;
        sleep_briefly();
        continue;
      }
      if (WIFEXITED(status) || WIFSIGNALED(status)) {
        threads_.erase(tid);
        return tid;
      }
      if (!WIFSTOPPED(status)) continue;
      Thread& t = threads_[tid];  // a new thread may report before its creator's event
      t.stopped = true;
      t.group_stop = false;
      int event = status >> 16;
      int sig = WSTOPSIG(status);
      if (event == PTRACE_EVENT_STOP) {
        t.group_stop = is_stop_signal(sig);
      } else if (event == PTRACE_EVENT_FORK || event == PTRACE_EVENT_VFORK) {
        unsigned long child = 0;
        ptrace(PTRACE_GETEVENTMSG, tid, 0, &child);
        bool shared = event == PTRACE_EVENT_VFORK;
        release_child(static_cast<pid_t>(child));
        if (shared) breakpoints_.clear();
      } else if (event == 0) {
        t.signal = sig;
      }
      return tid;
    }
  }

  pid_t pid_;
  int mem_fd_ = -1;
  std::map<pid_t, Thread> threads_;
  std::vector<Breakpoint> breakpoints_;
  std::map<std::pair<uint64_t, uint64_t>, bool> defines_malloc_;  // by kernel dev, inode
};

// The registers a call changes and the vector state (AVX included) it may.
struct SavedState {
  user_regs_struct regs{};
  std::vector<uint8_t> xstate;
};

SavedState save_state(pid_t tid) {
  SavedState s;
  if (ptrace(PTRACE_GETREGS, tid, 0, &s.regs) != 0) throw std::runtime_error(std::string("PTRACE_GETREGS: ") + std::strerror(errno));
  s.xstate.resize(16384);
  iovec io{s.xstate.data(), s.xstate.size()};
  if (ptrace(PTRACE_GETREGSET, tid, NT_X86_XSTATE, &io) != 0) throw std::runtime_error(std::string("PTRACE_GETREGSET: ") + std::strerror(errno));
  s.xstate.resize(io.iov_len);
  return s;
}

// Throws when the thread cannot be put back as it was (it would resume in
// the state of the call).
void restore_state(pid_t tid, SavedState& s) {
  iovec io{s.xstate.data(), s.xstate.size()};
  if (ptrace(PTRACE_SETREGS, tid, 0, &s.regs) != 0 || ptrace(PTRACE_SETREGSET, tid, NT_X86_XSTATE, &io) != 0)
    throw std::runtime_error("cannot restore the registers of thread " + std::to_string(tid) + ": " +
                             std::strerror(errno));
}

struct Libc {
  std::string path;  // as the process maps it
  uint64_t dlopen = 0, dlerror = 0, malloc = 0, free = 0;
};

// glibc's entry points in the process; throws RemoteCallRefused when it has
// none (a static executable, another C library).
Libc find_libc(pid_t pid, const std::vector<MapEntry>& maps) {
  const MapEntry* libc = nullptr;
  bool loader = false;
  for (const MapEntry& m : maps) {
    if (!libc && is_libc(m)) libc = &m;
    loader = loader || base_name(m.path).starts_with("ld-");
  }
  if (!libc && !loader) throw RemoteCallRefused("statically linked: no dynamic loader in the process to load the interposer");
  if (!libc) throw RemoteCallRefused("no glibc (libc.so.6) in the process");
  char file[96];
  std::snprintf(file, sizeof(file), "/proc/%d/map_files/%lx-%lx", pid, static_cast<unsigned long>(libc->start),
                static_cast<unsigned long>(libc->end));
  ElfFile elf(file);
  GElf_Ehdr header;
  if (!gelf_getehdr(elf.elf(), &header) || header.e_machine != EM_X86_64)
    throw RemoteCallRefused("not an x86-64 process (" + libc->path + ")");
  auto same = [&](const MapEntry& m) { return m.ino == libc->ino && m.kernel_dev() == libc->kernel_dev(); };
  auto address = [&](const char* name) {
    std::optional<uint64_t> offset = elf.dynamic_symbol_offset(name);
    return offset ? address_in(maps, same, *offset) : 0;
  };
  Libc found{libc->path, address("dlopen"), address("dlerror"), address("malloc"), address("free")};
  // Before glibc 2.34 dlopen is libdl's; its own variant is in libc.
  if (!found.dlopen) found.dlopen = address("__libc_dlopen_mode");
  if (!found.dlopen || !found.malloc || !found.free)
    throw RemoteCallRefused(libc->path + " has no dlopen, malloc or free to use");
  return found;
}

}  // namespace

RemoteResult call_in_process(pid_t pid, const RemoteCall& call) {
  std::vector<MapEntry> maps = read_maps(pid);
  if (maps.empty()) throw RemoteCallRefused("cannot read /proc/" + std::to_string(pid) + "/maps");
  Libc libc = find_libc(pid, maps);
  std::optional<uint64_t> function_offset = ElfFile(call.library).dynamic_symbol_offset(call.function);
  if (!function_offset) throw std::runtime_error(call.library + ": no " + call.function + " symbol");
  struct stat library;
  if (stat(call.library.c_str(), &library) != 0) throw std::runtime_error(call.library + ": " + std::strerror(errno));

  Tracer tracer(pid);
  if (!tracer.stop_all(Clock::now() + std::chrono::seconds(1)))
    throw RemoteCallRefused("the threads of pid " + std::to_string(pid) + " did not stop within 1 s");
  SafePoint safe_point = SafePoint::kWaiting;
  pid_t chosen = tracer.thread_waiting_safely(maps);
  if (!chosen && (chosen = tracer.thread_in_program_code(maps))) safe_point = SafePoint::kProgramCode;
  if (!chosen && (chosen = tracer.first_to_reach({libc.malloc, libc.free}, call.safe_point_wait)))
    safe_point = SafePoint::kBreakpoint;
  if (!chosen)
    throw RemoteCallRefused("no thread waited in a system call, ran the program's own code or called malloc or free "
                            "within " + std::to_string(call.safe_point_wait.count()) +
                            " ms (elsewhere a thread may hold a lock dlopen needs)");
  tracer.detach_all_but(chosen);

  SavedState saved = save_state(chosen);
  auto deadline = Clock::now() + std::chrono::seconds(10);
  try {
    uint64_t top = (saved.regs.rsp - 512) & ~uint64_t{15};
    // The strings go below the frame the call is made from.
    user_regs_struct frame = saved.regs;
    uint64_t path = tracer.push_string(top, call.library);
    uint64_t first = tracer.push_string(top, call.first);
    uint64_t second = call.second.empty() ? 0 : tracer.push_string(top, call.second);
    frame.rsp = top;
    uint64_t handle = tracer.call(chosen, frame, libc.dlopen, {path, kRtldNow}, deadline);
    if (!handle) {
      std::string why = libc.dlerror ? tracer.read_string(tracer.call(chosen, frame, libc.dlerror, {}, deadline)) : "?";
      throw std::runtime_error("dlopen in pid " + std::to_string(pid) + ": " + why);
    }
    std::vector<MapEntry> now = read_maps(pid);
    auto same = [&](const MapEntry& m) {
      return m.ino == library.st_ino && m.kernel_dev() == kernel_dev_of(library.st_dev);
    };
    uint64_t function = address_in(now, same, *function_offset);
    if (!function) throw std::runtime_error(call.library + " is not mapped in pid " + std::to_string(pid) + " after dlopen");
    uint64_t result = tracer.call(chosen, frame, function, {first, second}, deadline);
    restore_state(chosen, saved);
    return {static_cast<int>(result), safe_point};
  } catch (...) {
    restore_state(chosen, saved);  // the first error is the one to tell
    throw;
  }
}

}  // namespace memtrack
