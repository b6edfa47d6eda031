#include "export/module_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <stdexcept>
#include <utility>

#include "analyze/module_map.h"
#include "format/artifact.h"
#include "module/module_artifacts.h"
#include "module/module_elf.h"

namespace memtrack {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

struct ModuleFile {
  ModuleIdentity identity;
  std::vector<std::string> paths;  // recorded for this identity, in order of first use
  LocatedModule located;           // from the artifact's Module record, else from disk
  std::string key;                 // in memtrack.metadata
};

struct ProcessInfo {
  std::optional<int32_t> parent;  // from the pid's last Fork record
  std::vector<std::pair<uint64_t, std::shared_ptr<const ProcessImage>>> execs;  // (timestamp, image)
};

}  // namespace

ExportResult export_modules(const std::string& artifact, const std::string& dir, const LocateOptions& options) {
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

  ModuleArtifactsWriter writer(dir);
  for (ModuleFile& file : files) {
    auto module = embedded.find(file.identity);
    if (module != embedded.end()) {
      file.located.path = module->second.path;
      file.located.module = std::move(module->second);
    } else {
      file.located = locate_module(file.identity, file.paths, options);
    }
    file.key = writer.add_file(file.identity, file.paths.front(), file.located);
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

  writer.write_metadata(artifact, start_ns, std::move(processes_json));
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
