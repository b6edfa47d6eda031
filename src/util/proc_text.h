// The text of a /proc file of a process that may exit meanwhile. Read with
// read(2), not std::ifstream: the kernel fails the read of a gone process's
// file with ESRCH, and libstdc++'s file buffer turns a failed read into an
// exception (basic_filebuf::underflow), not an end of file — the recorder
// and its guardian must not die of a process ending while they look at it.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace memtrack {

// nullopt when the file cannot be opened or read (the process is gone).
std::optional<std::string> read_proc_text(const std::string& path);
// The same from a descriptor open on such a file, read from where it is.
std::optional<std::string> read_fd_text(int fd);
// The parent of process `pid` (/proc/PID/stat), or 0 when it is gone.
pid_t parent_of(pid_t pid);

}  // namespace memtrack
