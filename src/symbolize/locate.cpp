// locate_module_file: the recorded file under the sysroot, checked against
// the recorded identity, and its debug info.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <optional>
#include <utility>

#include "io/untrusted_file.h"
#include "symbolize/elf_file.h"
#include "symbolize/symbolizer.h"

namespace memtrack {

namespace {

using symbolize::ElfFile;
using symbolize::hex;

constexpr std::string_view kDeleted = " (deleted)";

std::string join(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? "" : separator) + part;
  return out;
}

std::string parent_dir(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

// Device (kernel encoding) and inode the kernel shows for a mapping of the
// file open on `fd`: what the recording saw. Not fstat, which reports the
// overlay's pseudo-device on overlayfs.
std::optional<std::pair<uint64_t, uint64_t>> mapped_dev_ino(int fd) {
  void* at = mmap(nullptr, 1, PROT_READ, MAP_PRIVATE, fd, 0);
  if (at == MAP_FAILED) return std::nullopt;
  std::optional<std::pair<uint64_t, uint64_t>> found;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (!found && std::getline(maps, line)) {
    unsigned long start = 0, major = 0, minor = 0;
    unsigned long long inode = 0;
    if (std::sscanf(line.c_str(), "%lx-%*x %*s %*x %lx:%lx %llu", &start, &major, &minor, &inode) == 4 &&
        start == reinterpret_cast<uintptr_t>(at))
      found.emplace(uint64_t{major} << 20 | minor, inode);
  }
  munmap(at, 1);
  return found;
}

// CRC-32 (zlib's, the one .gnu_debuglink uses) of the whole file.
std::optional<uint32_t> file_crc(int fd) {
  uLong crc = crc32(0, nullptr, 0);
  std::vector<unsigned char> buffer(1 << 16);
  off_t at = 0;
  for (;;) {
    const ssize_t n = pread(fd, buffer.data(), buffer.size(), at);
    if (n < 0) return std::nullopt;
    if (n == 0) return static_cast<uint32_t>(crc);
    crc = crc32(crc, buffer.data(), static_cast<uInt>(n));
    at += n;
  }
}

bool same_file(const std::string& a, int fd) {
  struct stat sa {}, sb {};
  return stat(a.c_str(), &sa) == 0 && fstat(fd, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

bool exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// A separate debug file for `file`: by build id, then by debug link. Sets
// `located.debug_path`, or explains in `why` what was tried.
void find_debug_file(const ElfFile& file, const std::vector<uint8_t>& build_id, const ModuleRef& module,
                     const SymbolizerOptions& options, LocatedFile& located, std::vector<std::string>& why) {
  std::vector<std::string> dirs = options.debug_dirs;
  dirs.push_back(options.sysroot + "/usr/lib/debug");

  if (build_id.size() >= 2) {
    const std::string id = hex(build_id);
    const std::string relative = "/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
    for (const auto& dir : dirs) {
      const std::string candidate = dir + relative;
      if (!exists(candidate)) continue;
      std::string error;
      auto debug = ElfFile::open(candidate, error);
      if (!debug) {
        why.push_back(error);
        continue;
      }
      if (auto found = debug->build_id(); found != build_id) {
        why.push_back(candidate + ": build id " + (found.empty() ? "none" : hex(found)) + ", not " + id);
        continue;
      }
      located.debug_path = candidate;
      return;
    }
    why.push_back("build id " + id + " not under " + join(dirs, ", "));
  }

  const auto link = file.debug_link();
  if (!link) {
    why.push_back("no .gnu_debuglink");
    return;
  }
  // The link comes from the file: a name, looked up only in the places below.
  if (link->name.find('/') != std::string::npos || link->name == "." || link->name == "..") {
    why.push_back("debug link " + link->name + " is not a file name");
    return;
  }
  // gdb's places: next to the file, its .debug subdirectory, then each
  // debug directory (flat, and with the recorded path's directory).
  const std::string file_dir = parent_dir(located.path);
  const std::string recorded_dir = parent_dir(module.path);
  std::vector<std::string> candidates = {file_dir + "/" + link->name, file_dir + "/.debug/" + link->name};
  for (const auto& dir : dirs) {
    candidates.push_back(dir + "/" + link->name);
    candidates.push_back(dir + recorded_dir + "/" + link->name);
  }
  for (const auto& candidate : candidates) {
    if (!exists(candidate)) continue;
    std::string error;
    auto debug = ElfFile::open(candidate, error);
    if (!debug) {
      why.push_back(error);
      continue;
    }
    if (same_file(located.path, debug->fd())) continue;  // the link names the file itself
    const auto crc = file_crc(debug->fd());
    if (!crc || *crc != link->crc) {
      char message[96];
      std::snprintf(message, sizeof message, ": CRC %08" PRIx32 ", the debug link wants %08" PRIx32,
                    crc.value_or(0), link->crc);
      why.push_back(candidate + message);
      continue;
    }
    if (auto found = debug->build_id(); !build_id.empty() && !found.empty() && found != build_id) {
      why.push_back(candidate + ": build id " + hex(found) + ", not " + hex(build_id));
      continue;
    }
    located.debug_path = candidate;
    return;
  }
  why.push_back("debug link " + link->name + " not found");
}

}  // namespace

LocatedFile locate_module_file(const ModuleRef& module, const SymbolizerOptions& options) {
  LocatedFile located;
  // Hostile artifacts name paths leaving the sysroot, or no file at all.
  if (std::string problem = recorded_path_problem(module.path); !problem.empty()) {
    located.problem = problem;
    return located;
  }
  std::vector<std::string> candidates = {options.sysroot + module.path};
  if (module.path.ends_with(kDeleted))
    candidates.push_back(options.sysroot + module.path.substr(0, module.path.size() - kDeleted.size()));

  std::vector<std::string> why;
  std::unique_ptr<ElfFile> file;
  for (const auto& candidate : candidates) {
    std::string error;
    file = ElfFile::open(candidate, error);
    if (!file) {
      why.push_back(error);
      continue;
    }
    if (!module.build_id.empty()) {
      if (auto found = file->build_id(); found != module.build_id) {
        why.push_back(candidate + ": build id mismatch: recorded " + hex(module.build_id) + ", file has " +
                      (found.empty() ? "none" : hex(found)));
        file.reset();
        continue;
      }
    } else if ((module.dev || module.ino) && options.sysroot.empty()) {
      // Only the path identifies the file: use it, but say when it is not
      // the one that was mapped (on this machine the device and inode tell).
      if (auto ids = mapped_dev_ino(file->fd()); ids && (ids->first != module.dev || ids->second != module.ino)) {
        char message[160];
        std::snprintf(message, sizeof message,
                      ": device/inode differ: recorded %" PRIx64 "/%" PRIu64 ", file has %" PRIx64 "/%" PRIu64,
                      module.dev, module.ino, ids->first, ids->second);
        why.push_back(candidate + message);
      }
    }
    located.path = candidate;
    break;
  }
  if (!file) {
    located.problem = join(why, "; ");
    return located;
  }

  if (!file->has_dwarf()) {
    std::vector<std::string> debug_why;
    find_debug_file(*file, module.build_id.empty() ? file->build_id() : module.build_id, module, options, located,
                    debug_why);
    if (located.debug_path.empty())
      why.push_back(located.path + ": no debug info (" + join(debug_why, "; ") + ")");
  }
  located.problem = join(why, "; ");
  return located;
}

}  // namespace memtrack
