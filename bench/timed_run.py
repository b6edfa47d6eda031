#!/usr/bin/python3
"""timed_run.py OUT COMMAND...: runs COMMAND and writes "wall user system peak_rss
minor_faults" (seconds, seconds, seconds, KiB, count) to OUT, like
`/usr/bin/time -f "%e %U %S %M %R"`, with two differences: the wall time
ends when COMMAND exits, and the CPU time is that of every process COMMAND
started, also of those still running when it exited (they are waited for: this
process is their subreaper), and so are the peak RSS (the largest process's;
never below this script's ~9 MB, which the command's process had before its
exec) and the minor faults (all of them). memtrack exits once the artifact is complete, and
its recorder releases the kernel's probes and maps after that: its CPU counts.
Exits with COMMAND's status (1 when it cannot be run)."""
import ctypes
import os
import resource
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def main():
    out, command = sys.argv[1], sys.argv[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("timed_run.py: prctl(PR_SET_CHILD_SUBREAPER): " + os.strerror(ctypes.get_errno()))
    start = time.monotonic()
    try:  # vfork-like: no copy of this process is counted in the peak RSS
        pid = os.posix_spawnp(command[0], command, os.environ)
    except OSError as e:
        sys.exit("timed_run.py: %s: %s" % (command[0], e.strerror))
    _, status = os.waitpid(pid, 0)
    wall = time.monotonic() - start
    while True:  # what it left running
        try:
            os.wait()
        except ChildProcessError:
            break
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out, "w") as f:
        f.write("%.3f %.3f %.3f %d %d\n" % (wall, usage.ru_utime, usage.ru_stime, usage.ru_maxrss, usage.ru_minflt))
    sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


main()
