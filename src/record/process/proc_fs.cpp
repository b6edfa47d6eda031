#include "record/process/proc_fs.h"

#include <dirent.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "util/proc_text.h"

namespace memtrack {

uint64_t kernel_dev_of(dev_t dev) { return (uint64_t(major(dev)) << 20) | minor(dev); }

namespace {

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> names;
  if (DIR* dir = opendir(path.c_str())) {
    while (dirent* d = readdir(dir))
      if (d->d_name[0] != '.') names.emplace_back(d->d_name);
    closedir(dir);
  }
  return names;
}

}  // namespace

ProcessImage read_process_image(pid_t pid) {
  std::string dir = "/proc/" + std::to_string(pid);
  ProcessImage image;
  std::error_code ignored;
  image.path = std::filesystem::read_symlink(dir + "/exe", ignored).string();
  std::ifstream comm(dir + "/comm");
  std::getline(comm, image.comm);
  std::ifstream cmdline(dir + "/cmdline");
  for (std::string arg; std::getline(cmdline, arg, '\0');) image.argv.push_back(arg);
  return image;
}


std::vector<pid_t> process_tree(pid_t root) {
  std::multimap<pid_t, pid_t> children;
  for (const auto& name : list_dir("/proc")) {
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = std::stoi(name);
    children.emplace(parent_of(pid), pid);
  }
  std::vector<pid_t> tree{root};
  for (size_t i = 0; i < tree.size(); ++i) {
    auto [lo, hi] = children.equal_range(tree[i]);
    for (auto it = lo; it != hi; ++it) tree.push_back(it->second);
  }
  return tree;
}

std::string status_field(pid_t pid, const char* name) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  size_t len = std::strlen(name);
  while (std::getline(status, line))
    if (line.compare(0, len, name) == 0) return line.substr(len);
  return {};
}

}  // namespace memtrack
