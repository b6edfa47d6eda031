// Programs whose runtime must come first in the initial library list (the
// sanitizers' shared runtimes, e.g. gcc -fsanitize=address's libasan.so)
// abort when the interposer is preloaded before them. Such a process is left
// to the uprobes: while it is stopped at its exec, before the dynamic loader
// runs, the interposer's entry in its LD_PRELOAD is blanked (the loader skips
// an entry of spaces), so it runs exactly as untraced.
#pragma once

#include <sys/types.h>

#include <string>

namespace memtrack {

// The runtime library among `executable`'s DT_NEEDED entries that must come
// first (libasan, libtsan, libmsan, liblsan, libhwasan, libubsan), or "".
// Throws when the file cannot be read as ELF.
std::string runtime_that_must_come_first(const std::string& executable);

// Blanks `library` in the LD_PRELOAD entry of the environment of `pid` (a
// stopped process at its exec), leaving the user's own entries. False with
// `error` when it is not there or cannot be written.
bool remove_from_ld_preload(pid_t pid, const std::string& library, std::string* error);

}  // namespace memtrack
