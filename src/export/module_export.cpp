#include "export/module_export.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <stdexcept>
#include <utility>

#include "analyze/module_map.h"
#include "export/module_elf.h"
#include "format/artifact.h"
#include "io/untrusted_file.h"

namespace memtrack {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr std::string_view kDeletedSuffix = " (deleted)";

std::string hex(const std::vector<uint8_t>& bytes) {
  std::string text;
  for (uint8_t byte : bytes) text += fmt::format("{:02x}", byte);
  return text;
}

// Device (kernel encoding, major << 20 | minor) and inode of the file open on
// `fd` as the kernel names it in a mapping, which is what the recording saw:
// on overlayfs, fstat reports the overlay's pseudo-device while mappings name
// the underlying file.
std::optional<std::pair<uint64_t, uint64_t>> mapped_identity(int fd) {
  void* at = mmap(nullptr, 1, PROT_READ, MAP_PRIVATE, fd, 0);
  if (at == MAP_FAILED) return std::nullopt;
  std::optional<std::pair<uint64_t, uint64_t>> found;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    unsigned long start = 0, major = 0, minor = 0;
    unsigned long long inode = 0;
    if (std::sscanf(line.c_str(), "%lx-%*x %*s %*x %lx:%lx %llu", &start, &major, &minor, &inode) == 4 &&
        start == reinterpret_cast<uintptr_t>(at)) {
      found.emplace(uint64_t{major} << 20 | minor, inode);
      break;
    }
  }
  munmap(at, 1);
  return found;
}

// The outcome of looking at one path: the ELF data when it is the file the
// recording mapped, else a status and the reason.
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
    return {std::nullopt, err == ENOENT || err == ENOTDIR ? "missing" : "unreadable",
            e.reason()};
  }
  const int fd = opened->fd();
  if (identity.build_id.empty()) {
    if (identity.dev == 0 && identity.ino == 0)
      return {std::nullopt, "unverified", "the recording gives neither a build id nor a device and inode"};
    auto on_disk = mapped_identity(fd);
    if (!on_disk) return {std::nullopt, "unreadable", "cannot map it to read its device and inode"};
    if (*on_disk != std::pair{identity.dev, identity.ino})
      return {std::nullopt, "changed",
              fmt::format("device {:x} inode {} on disk, device {:x} inode {} in the recording: another file is "
                          "there now",
                          on_disk->first, on_disk->second, identity.dev, identity.ino)};
  }
  ElfModule elf;
  try {
    elf = read_elf_module(fd);
  } catch (const std::exception& e) {
    return {std::nullopt, "unreadable", e.what()};
  }
  if (!identity.build_id.empty() && elf.build_id != identity.build_id) {
    return {std::nullopt, "changed",
            elf.build_id.empty()
                ? fmt::format("no build id on disk, {} in the recording: another file is there now",
                              hex(identity.build_id))
                : fmt::format("build id {} on disk, {} in the recording: the file changed since the recording",
                              hex(elf.build_id), hex(identity.build_id))};
  }
  return {std::move(elf), "exported", ""};
}

// What export-modules writes of a verified file: its symbols.map entries
// include those of its separate debug file when one of the same build is found.
ModuleInfo describe(const std::string& path, ElfModule elf, const ExportOptions& options) {
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
  const std::string id = hex(elf.build_id);
  if (id.size() > 2) {
    const std::string debug = fmt::format("{}/.build-id/{}/{}.debug", options.debug_root, id.substr(0, 2), id.substr(2));
    try {
      ElfModule debug_elf = read_elf_module(UntrustedFile::open(debug, kAnySize).fd());
      // Used only when it is the debug file of this very build.
      if (debug_elf.build_id == elf.build_id) {
        module.debug_file = debug;
        symbols.insert(symbols.end(), debug_elf.symbols.begin(), debug_elf.symbols.end());
      }
    } catch (const std::exception&) {
      // Missing, not a regular file or not an ELF file: there is no usable debug file.
    }
  }
  module.symbols = symbol_map(std::move(symbols));
  module.build_id = std::move(elf.build_id);
  return module;
}

struct ModuleFile {
  ModuleIdentity identity;
  std::vector<std::string> paths;  // recorded for this identity, in order of first use
  LocatedModule located;           // from the artifact's Module record, else from disk
  std::string key;
};

// The file's first recorded name// The file's first recorded name, reduced to characters safe in any file name.
std::string safe_basename(const ModuleFile& file) {
  const std::string& path = file.paths.front();
  std::string name = path.substr(path.rfind('/') + 1);
  if (name.ends_with(kDeletedSuffix)) name.resize(name.size() - kDeletedSuffix.size());
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' && c != '+') c = '_';
  return name.empty() ? "file" : name;
}

// From the recorded identity only, so that a key does not depend on what is
// on disk now.
std::string key_base(const ModuleFile& file) {
  if (!file.identity.build_id.empty()) return hex(file.identity.build_id).substr(0, 12) + "-" + safe_basename(file);
  return fmt::format("dev{:x}-ino{}-{}", file.identity.dev, file.identity.ino, safe_basename(file));
}

void write_bytes(const fs::path& path, const std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

Json section_entry(const std::optional<SectionBytes>& section, const std::string& name, const fs::path& dir) {
  if (!section) return nullptr;
  write_bytes(dir / name,
              std::string_view(reinterpret_cast<const char*>(section->bytes.data()), section->bytes.size()));
  return Json{{"file", name}, {"address", section->address}, {"size", section->bytes.size()}};
}

// Writes the file's artifacts into `dir` and returns its metadata entry.
Json export_file(const ModuleFile& file, const fs::path& dir) {
  Json entry;
  const LocatedModule& located = file.located;
  entry["path"] = located.path;
  entry["status"] = located.module ? "exported" : located.status;
  entry["reason"] = located.module ? Json(nullptr) : Json(located.reason);
  const bool by_build_id = !file.identity.build_id.empty();
  entry["identity"] = by_build_id ? "build-id" : "dev-ino";
  const std::vector<uint8_t>& build_id = located.module ? located.module->build_id : file.identity.build_id;
  entry["build_id"] = build_id.empty() ? Json(nullptr) : Json(hex(build_id));
  entry["dev"] = by_build_id ? Json(nullptr) : Json(file.identity.dev);
  entry["ino"] = by_build_id ? Json(nullptr) : Json(file.identity.ino);

  Json missing = Json::array();
  if (!located.module) {
    for (const char* item : {"symbols", "cfi", "load_segments"}) missing.push_back(item);
    for (const char* item : {"load_segments", "eh_frame", "eh_frame_hdr", "debug_frame", "debug_link", "debug_file",
                             "symbols_file"})
      entry[item] = nullptr;
    entry["symbols"] = 0;
    entry["missing"] = std::move(missing);
    return entry;
  }

  const ModuleInfo& module = *located.module;
  Json segments = Json::array();
  for (const LoadSegment& s : module.load_segments)
    segments.push_back(
        {{"vaddr", s.vaddr}, {"offset", s.offset}, {"filesz", s.filesz}, {"memsz", s.memsz}, {"flags", s.flags}});
  entry["load_segments"] = std::move(segments);
  if (module.eh_frame) {
    entry["eh_frame"] = section_entry(module.eh_frame, file.key + ".eh_frame", dir);
    entry["eh_frame_hdr"] = section_entry(module.eh_frame_hdr, file.key + ".eh_frame_hdr", dir);
    entry["debug_frame"] = nullptr;
  } else {
    entry["eh_frame"] = nullptr;
    entry["eh_frame_hdr"] = nullptr;
    entry["debug_frame"] = section_entry(module.debug_frame, file.key + ".debug_frame", dir);
  }
  entry["debug_link"] =
      module.debug_link ? Json{{"name", module.debug_link->name}, {"crc", module.debug_link->crc}} : Json(nullptr);
  entry["debug_file"] = module.debug_file.empty() ? Json(nullptr) : Json(module.debug_file);
  if (module.symbols.empty()) {
    entry["symbols_file"] = nullptr;
  } else {
    std::string text;
    for (const FunctionSymbol& s : module.symbols) text += fmt::format("{:x} {:x} {}\n", s.address, s.size, s.name);
    write_bytes(dir / (file.key + ".symbols.map"), text);
    entry["symbols_file"] = file.key + ".symbols.map";
  }
  entry["symbols"] = module.symbols.size();

  if (module.symbols.empty()) missing.push_back("symbols");
  if (!module.eh_frame && !module.debug_frame) missing.push_back("cfi");
  if (module.eh_frame && !module.eh_frame_hdr) missing.push_back("eh_frame_hdr");
  if (module.load_segments.empty()) missing.push_back("load_segments");
  entry["missing"] = std::move(missing);
  return entry;
}

struct ProcessInfo {
  std::optional<int32_t> parent;  // from the pid's last Fork record
  std::vector<std::pair<uint64_t, std::shared_ptr<const ProcessImage>>> execs;  // (timestamp, image)
};

}  // namespace

ModuleIdentity identity_of(const MappingInfo& mapping) {
  if (!mapping.build_id.empty()) return {mapping.build_id, 0, 0};
  return {{}, mapping.dev, mapping.ino};
}

ModuleIdentity identity_of(const ModuleInfo& module) {
  if (module.dev != 0 || module.ino != 0) return {{}, module.dev, module.ino};
  return {module.build_id, 0, 0};
}

LocatedModule locate_module(const ModuleIdentity& identity, const std::vector<std::string>& paths,
                            const ExportOptions& options) {
  LocatedModule located;
  located.path = paths.front();
  std::string reasons;
  for (const std::string& recorded : paths) {
    // A file replaced while mapped: an identical copy may be at the path now.
    const bool deleted = recorded.ends_with(kDeletedSuffix);
    const std::string path = deleted ? recorded.substr(0, recorded.size() - kDeletedSuffix.size()) : recorded;
    Checked checked = check_file(path, identity);
    if (checked.elf) {
      located.path = path;
      located.module = describe(path, std::move(*checked.elf), options);
      // So that the module names the Mapping records it describes (identity_of).
      if (identity.build_id.empty()) {
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

ExportResult export_modules(const std::string& artifact, const std::string& dir, const ExportOptions& options) {
  ModuleMap modules;
  std::map<int32_t, ProcessInfo> processes;
  std::map<ModuleIdentity, size_t> file_index;
  std::vector<ModuleFile> files;
  std::map<ModuleIdentity, ModuleInfo> embedded;  // Module records, by the identity they describe
  // Module records follow every Mapping record (docs/FORMAT.md §2.4): only
  // those describing a mapped file are kept, each once, so a hostile file
  // cannot make the export hold every record it repeats.
  auto on_module = [&](const ModuleInfo& module) {
    ModuleIdentity identity = identity_of(module);
    if (file_index.count(identity)) embedded.try_emplace(identity, module);
  };
  const ReadResult read = read_artifact(artifact, [&](const Event& event) {
    switch (event.type) {
      case EventType::Mapping: {
        if (!event.mapping) return;
        processes[event.pid];
        auto [it, added] = file_index.try_emplace(identity_of(*event.mapping), files.size());
        if (added) files.emplace_back().identity = it->first;
        auto& paths = files[it->second].paths;
        if (std::find(paths.begin(), paths.end(), event.mapping->path) == paths.end())
          paths.push_back(event.mapping->path);
        break;
      }
      case EventType::Fork:
        processes[event.pid].parent = event.parent_pid;
        break;
      case EventType::Exec:
        processes[event.pid].execs.emplace_back(event.timestamp, event.image);
        break;
      case EventType::Exit:
        processes[event.pid];
        break;
      default:
        return;  // allocations and stacks place nothing
    }
    modules.on_event(event);
  }, on_module);

  ExportResult result;
  result.warnings = read.warnings;
  result.error = read.error;
  if (files.empty())
    result.warnings.push_back(artifact + ": no Mapping records: the recording has no module placements");

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create " + dir + ": " + ec.message());
  const fs::path out_dir(dir);

  std::set<std::string> keys;
  Json files_json = Json::object();
  for (ModuleFile& file : files) {
    auto module = embedded.find(file.identity);
    if (module != embedded.end()) {
      file.located.path = module->second.path;
      file.located.module = std::move(module->second);
    } else {
      file.located = locate_module(file.identity, file.paths, options);
    }
    const std::string base = key_base(file);
    file.key = base;
    for (int n = 2; !keys.insert(file.key).second; ++n) file.key = fmt::format("{}-{}", base, n);
    files_json[file.key] = export_file(file, out_dir);
    if (file.located.module)
      ++result.files_exported;
    else
      result.warnings.push_back(fmt::format("{}: {}; not exported", file.located.path, file.located.reason));
  }
  result.files = files.size();

  const uint64_t start_ns = read.header.start_monotonic_ns;
  const uint64_t page_size = std::has_single_bit(read.header.page_size) ? read.header.page_size : 4096;
  auto since_start = [&](uint64_t timestamp) { return static_cast<int64_t>(timestamp - start_ns); };
  Json processes_json = Json::object();
  for (const auto& [pid, info] : processes) {
    Json process;
    const ProcessImage* image = info.execs.empty() ? nullptr : info.execs.back().second.get();
    if (!image)
      process["command"] = nullptr;
    else
      process["command"] = image->argv.empty() ? Json::array({image->path}) : Json(image->argv);
    process["comm"] = image ? Json(image->comm) : Json(nullptr);
    process["parent"] = info.parent ? Json(*info.parent) : Json(nullptr);
    Json execs = Json::array();
    for (const auto& [timestamp, exec] : info.execs) {
      if (!exec) continue;
      execs.push_back({{"at_ns", since_start(timestamp)}, {"path", exec->path}, {"comm", exec->comm},
                       {"argv", exec->argv}});
    }
    process["execs"] = std::move(execs);
    Json placements = Json::array();
    for (const Placement& placement : modules.placements(pid)) {
      const ModuleFile& file = files[file_index.at(identity_of(*placement.mapping))];
      std::optional<uint64_t> bias;
      if (file.located.module)
        bias = load_bias(file.located.module->load_segments, placement.start, placement.mapping->file_offset,
                         placement.mapping->prot & 4 /* PROT_EXEC */, page_size);
      placements.push_back({{"key", file.key},
                            {"start", placement.start},
                            {"end", placement.end},
                            {"file_offset", placement.mapping->file_offset},
                            // Signed: a file linked above where it was mapped has a negative bias.
                            {"load_bias", bias ? Json(static_cast<int64_t>(*bias)) : Json(nullptr)},
                            {"from_ns", since_start(placement.from_ns)},
                            {"to_ns", placement.to_ns == Placement::kOpen ? Json(nullptr)
                                                                          : Json(since_start(placement.to_ns))}});
    }
    result.placements += placements.size();
    process["placements"] = std::move(placements);
    processes_json[std::to_string(pid)] = std::move(process);
  }
  result.processes = processes.size();

  Json metadata;
  metadata["version"] = 1;
  metadata["artifact"] = artifact;
  metadata["start_monotonic_ns"] = start_ns;
  metadata["files"] = std::move(files_json);
  metadata["processes"] = std::move(processes_json);
  write_bytes(out_dir / "memtrack.metadata", metadata.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  return result;
}

int run_export_modules(const std::string& artifact, const std::string& dir, std::ostream& out, std::ostream& err) {
  const ExportResult result = export_modules(artifact, dir);
  for (const std::string& warning : result.warnings) err << "memtrack export-modules: warning: " << warning << "\n";
  if (result.error) err << "memtrack export-modules: " << *result.error << "\n";
  out << fmt::format("{} files ({} exported), {} processes, {} placements: {}\n", result.files,
                     result.files_exported, result.processes, result.placements,
                     (fs::path(dir) / "memtrack.metadata").string());
  return result.exit_status();
}

}  // namespace memtrack
