#include "module/locate.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <utility>

#include "io/untrusted_file.h"
#include "module/elf_file.h"
#include "module/module_elf.h"
#include "util/hex.h"
#include "util/proc_maps.h"

namespace memtrack {

namespace {

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

std::string without_deleted(const std::string& path) {
  return path.ends_with(kDeleted) ? path.substr(0, path.size() - kDeleted.size()) : path;
}

// Device (kernel encoding, major << 20 | minor) and inode of the file open on
// `fd` as the kernel names it in a mapping, which is what the recording saw:
// on overlayfs, fstat reports the overlay's pseudo-device while mappings name
// the underlying file.
std::optional<std::pair<uint64_t, uint64_t>> mapped_dev_ino(int fd) {
  void* at = mmap(nullptr, 1, PROT_READ, MAP_PRIVATE, fd, 0);
  if (at == MAP_FAILED) return std::nullopt;
  std::optional<std::pair<uint64_t, uint64_t>> found;
  for (const MapEntry& entry : read_maps_file("/proc/self/maps"))
    if (entry.start == reinterpret_cast<uintptr_t>(at)) {
      found.emplace(entry.kernel_dev(), entry.ino);
      break;
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

std::vector<std::string> debug_dirs(const LocateOptions& options) {
  std::vector<std::string> dirs = options.debug_dirs;
  dirs.push_back(options.sysroot + "/usr/lib/debug");
  return dirs;
}

// The separate debug file of this very build, <dir>/.build-id/xx/yyyy.debug
// in the first of `dirs` holding one; empty (and what was tried in `why`)
// when none.
std::string debug_file_by_build_id(const std::vector<uint8_t>& build_id, const std::vector<std::string>& dirs,
                                   std::vector<std::string>& why) {
  if (build_id.size() < 2) return {};
  const std::string id = hex(build_id);
  const std::string relative = "/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
  for (const auto& dir : dirs) {
    const std::string candidate = dir + relative;
    if (!exists(candidate)) continue;
    try {
      if (auto found = ElfFile(candidate).build_id(); found != build_id) {
        why.push_back(candidate + ": build id " + (found.empty() ? "none" : hex(found)) + ", not " + id);
        continue;
      }
    } catch (const ElfError& e) {
      why.push_back(e.what());
      continue;
    }
    return candidate;
  }
  why.push_back("build id " + id + " not under " + join(dirs, ", "));
  return {};
}

// A separate debug file for `file`: by build id, then by debug link. Sets
// `located.debug_path`, or explains in `why` what was tried.
void find_debug_file(const ElfFile& file, const std::vector<uint8_t>& build_id, const ModuleRef& module,
                     const LocateOptions& options, LocatedFile& located, std::vector<std::string>& why) {
  const std::vector<std::string> dirs = debug_dirs(options);
  located.debug_path = debug_file_by_build_id(build_id, dirs, why);
  if (!located.debug_path.empty()) return;

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
    std::unique_ptr<ElfFile> debug;
    try {
      debug = std::make_unique<ElfFile>(candidate);
    } catch (const ElfError& e) {
      why.push_back(e.what());
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

// The outcome of looking at one path for locate_module: the ELF data when it
// is the file the recording mapped, else a status and the reason.
struct Checked {
  std::optional<ElfModule> elf;
  std::string status;
  std::string reason;
};

Checked check_file(const std::string& path, const ModuleIdentity& identity) {
  if (std::string problem = recorded_path_problem(path); !problem.empty()) return {std::nullopt, "unreadable", problem};
  std::optional<UntrustedFile> opened;
  try {
    opened.emplace(UntrustedFile::open(path, kAnySize));  // mapped by libelf, not read: any size
  } catch (const UntrustedFileError& e) {
    const int err = e.error_number();
    return {std::nullopt, err == ENOENT || err == ENOTDIR ? "missing" : "unreadable", e.reason()};
  }
  if (!identity.by_build_id()) {
    if (!identity.by_dev_ino())
      return {std::nullopt, "unverified", "the recording gives neither a build id nor a device and inode"};
    auto on_disk = mapped_dev_ino(opened->fd());
    if (!on_disk) return {std::nullopt, "unreadable", "cannot map it to read its device and inode"};
    if (*on_disk != std::pair{identity.dev, identity.ino})
      return {std::nullopt, "changed",
              fmt::format("device {:x} inode {} on disk, device {:x} inode {} in the recording: another file is "
                          "there now",
                          on_disk->first, on_disk->second, identity.dev, identity.ino)};
  }
  ElfModule elf;
  try {
    elf = read_elf_module(ElfFile(std::move(*opened)));
  } catch (const ElfError& e) {
    return {std::nullopt, "unreadable", e.reason()};
  }
  if (identity.by_build_id() && elf.build_id != identity.build_id) {
    return {std::nullopt, "changed",
            elf.build_id.empty()
                ? fmt::format("no build id on disk, {} in the recording: another file is there now",
                              hex(identity.build_id))
                : fmt::format("build id {} on disk, {} in the recording: the file changed since the recording",
                              hex(elf.build_id), hex(identity.build_id))};
  }
  return {std::move(elf), "exported", ""};
}

// What is copied of a verified file: its symbols.map entries include those
// of its separate debug file when one of the same build is found.
ModuleInfo describe(const std::string& path, ElfModule elf, const LocateOptions& options) {
  ModuleInfo module;
  module.path = path;
  module.load_segments = std::move(elf.load_segments);
  // Only what export-modules writes: the index with its .eh_frame, and
  // .debug_frame only without one.
  if (elf.eh_frame) {
    module.eh_frame = std::move(elf.eh_frame);
    module.eh_frame_hdr = std::move(elf.eh_frame_hdr);
  } else {
    module.debug_frame = std::move(elf.debug_frame);
  }
  module.debug_link = std::move(elf.debug_link);
  std::vector<FunctionSymbol> symbols = std::move(elf.symbols);
  std::vector<std::string> ignored;  // without a usable debug file the module is complete without its symbols
  if (std::string debug = debug_file_by_build_id(elf.build_id, debug_dirs(options), ignored); !debug.empty()) {
    try {
      ElfModule debug_elf = read_elf_module(debug);
      module.debug_file = debug;
      symbols.insert(symbols.end(), debug_elf.symbols.begin(), debug_elf.symbols.end());
    } catch (const ElfError&) {
      // Gone or unreadable since it was found: there is no usable debug file.
    }
  }
  module.symbols = symbol_map(std::move(symbols));
  module.build_id = std::move(elf.build_id);
  return module;
}

}  // namespace

LocatedFile locate_module_file(const ModuleRef& module, const LocateOptions& options) {
  LocatedFile located;
  // Hostile artifacts name paths leaving the sysroot, or no file at all.
  if (std::string problem = recorded_path_problem(module.path); !problem.empty()) {
    located.problem = problem;
    return located;
  }
  std::vector<std::string> candidates = {options.sysroot + module.path};
  if (module.path.ends_with(kDeleted)) candidates.push_back(options.sysroot + without_deleted(module.path));

  std::vector<std::string> why;
  std::unique_ptr<ElfFile> file;
  for (const auto& candidate : candidates) {
    try {
      file = std::make_unique<ElfFile>(candidate);
    } catch (const ElfError& e) {
      why.push_back(e.what());
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

LocatedModule locate_module(const ModuleIdentity& identity, const std::vector<std::string>& paths,
                            const LocateOptions& options) {
  LocatedModule located;
  located.path = paths.front();
  std::string reasons;
  for (const std::string& recorded : paths) {
    // A file replaced while mapped: an identical copy may be at the path now.
    const bool deleted = recorded.ends_with(kDeleted);
    const std::string path = options.sysroot + without_deleted(recorded);
    Checked checked = check_file(path, identity);
    if (checked.elf) {
      located.path = path;
      located.module = describe(path, std::move(*checked.elf), options);
      // So that the module names the Mapping records it describes (identity_of).
      if (!identity.by_build_id()) {
        located.module->dev = identity.dev;
        located.module->ino = identity.ino;
      }
      return located;
    }
    if (located.status.empty()) located.status = checked.status;
    if (!reasons.empty()) reasons += "; ";
    if (paths.size() > 1) reasons += path + ": ";
    if (deleted) reasons += "deleted while mapped, and at the path now: ";
    reasons += checked.reason;
  }
  located.reason = reasons;
  return located;
}

}  // namespace memtrack
