// What memtrack's two ptrace tracers share: the hold of a starting command
// (ptrace_hold.h) and the in-process attach (remote_call.h).
#pragma once

#include <signal.h>
#include <sys/ptrace.h>

namespace memtrack {

// New threads and children are traced from their first instruction (a child
// forked while an attach's breakpoint is in place gets its original bytes
// back before it runs). Not PTRACE_O_TRACEEXEC: the kernel's SIGSTOP at exec
// would be pending during the exec event stop, and a group stop if the
// tracer died then.
inline constexpr long kTraceNewTasks = PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACECLONE;

// A signal that stops the whole group when delivered.
inline bool is_stop_signal(int sig) { return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU; }

}  // namespace memtrack
