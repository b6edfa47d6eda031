// Reading /proc: a process's image, its children (its mappings: util/proc_maps.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/event.h"
#include "util/proc_maps.h"  // read_maps

namespace memtrack {

// The kernel encoding of a stat() st_dev.
uint64_t kernel_dev_of(dev_t dev);

// What /proc says of a running process's image: exe path, comm, argv.
ProcessImage read_process_image(pid_t pid);

// A field of /proc/PID/status (e.g. "Tgid:"; PID may be any thread's),
// or empty.
std::string status_field(pid_t pid, const char* name);

// `root` and all its live descendants, parents before children.
std::vector<pid_t> process_tree(pid_t root);

}  // namespace memtrack
