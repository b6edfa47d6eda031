#include "util/proc_maps.h"

#include <cinttypes>
#include <cstdio>
#include <fstream>

namespace memtrack {

std::optional<MapEntry> parse_maps_line(std::string_view line) {
  const std::string text(line);  // sscanf wants a terminated string
  MapEntry e;
  char perms[5] = {};
  int path_pos = -1;
  if (std::sscanf(text.c_str(), "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 " %n", &e.start, &e.end,
                  perms, &e.offset, &e.dev_major, &e.dev_minor, &e.ino, &path_pos) < 7)
    return std::nullopt;
  e.perms = perms;
  if (path_pos > 0 && static_cast<size_t>(path_pos) < text.size()) e.path = text.substr(path_pos);
  return e;
}

std::vector<MapEntry> read_maps_file(const std::string& path) {
  std::vector<MapEntry> entries;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (auto e = parse_maps_line(line)) entries.push_back(std::move(*e));
  return entries;
}

std::vector<MapEntry> read_maps(pid_t pid) { return read_maps_file("/proc/" + std::to_string(pid) + "/maps"); }

}  // namespace memtrack
