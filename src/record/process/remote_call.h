// Loading a library into a running process and calling a function of it
// through ptrace, as `record --pid` loads the interposer (no gdb): a thread
// is stopped where it holds no allocator or loader lock (blocked in a system
// call that waits, running the program's own code, else at the entry of
// malloc or free), made to call the process's own dlopen and then the
// function, and put back as it was.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <stdexcept>
#include <string>

namespace memtrack {

// Why the call cannot be made safely, thrown before anything in the process
// changed: ptrace refused (Yama, seccomp, another tracer), no glibc loader
// (a static executable), no thread reached a safe point in time.
class RemoteCallRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RemoteCall {
  std::string library;   // dlopen'ed (RTLD_NOW)
  std::string function;  // then called: int function(const char*, const char*)
  std::string first;
  std::string second;  // empty: NULL
  // How long the threads may take to reach a safe point.
  std::chrono::milliseconds safe_point_wait{100};
};

// Where the thread that made the call was stopped.
enum class SafePoint { kWaiting, kProgramCode, kBreakpoint };

struct RemoteResult {
  int value;  // the function's
  SafePoint safe_point;
};

// Makes `call` in process `pid`. The other threads run on meanwhile (one of
// them may hold the lock dlopen needs). Throws RemoteCallRefused as above,
// std::runtime_error when dlopen or the call failed (the process runs on:
// its registers restored).
RemoteResult call_in_process(pid_t pid, const RemoteCall& call);

}  // namespace memtrack
