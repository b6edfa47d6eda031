// /proc/PID/maps, parsed in one place: the recorder's snapshots, the
// device/inode check of a file mapped by memtrack itself, tests and benches.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memtrack {

struct MapEntry {
  uint64_t start = 0, end = 0, offset = 0;
  std::string perms;  // "r-xp"
  uint32_t dev_major = 0, dev_minor = 0;
  uint64_t ino = 0;
  std::string path;  // empty for anonymous mappings; "[stack]", "... (deleted)" as the kernel shows them

  bool readable() const { return perms.size() > 0 && perms[0] == 'r'; }
  bool executable() const { return perms.size() > 2 && perms[2] == 'x'; }
  bool contains(uint64_t address) const { return start <= address && address < end; }
  // The kernel's s_dev encoding (major << 20 | minor), as the BPF side and
  // the recording see it.
  uint64_t kernel_dev() const { return (uint64_t{dev_major} << 20) | dev_minor; }
};

// One line of a maps file; nullopt for a malformed line.
std::optional<MapEntry> parse_maps_line(std::string_view line);
// Every well-formed line of `path` (e.g. "/proc/self/maps"); empty when it
// cannot be read (the process is gone).
std::vector<MapEntry> read_maps_file(const std::string& path);
std::vector<MapEntry> read_maps(pid_t pid);

}  // namespace memtrack
