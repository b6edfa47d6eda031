// Reading /proc: a process's mappings, its threads' states, its children.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/event.h"

namespace memtrack {

struct MapEntry {
  uint64_t start = 0, end = 0, offset = 0;
  bool executable = false;
  uint32_t dev_major = 0, dev_minor = 0;
  uint64_t ino = 0;
  std::string path;  // empty for anonymous mappings
  // The kernel's s_dev encoding (major << 20 | minor), as the BPF side sees it.
  uint64_t kernel_dev() const { return (uint64_t(dev_major) << 20) | dev_minor; }
};

// Empty when the process is gone.
std::vector<MapEntry> read_maps(pid_t pid);
// The kernel encoding of a stat() st_dev.
uint64_t kernel_dev_of(dev_t dev);

// What /proc says of a running process's image: exe path, comm, argv.
ProcessImage read_process_image(pid_t pid);

// `root` and all its live descendants, parents before children.
std::vector<pid_t> process_tree(pid_t root);
pid_t parent_of(pid_t pid);

}  // namespace memtrack
