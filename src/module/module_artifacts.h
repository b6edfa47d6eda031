// The export-modules directory (docs/MODULES.md), written and read in this
// one place: `memtrack export-modules` writes it (ModuleArtifactsWriter),
// `memtrack report --modules DIR` reads it back into ModuleInfo records, so a
// report on another machine can unwind and name the frames of files it does
// not have.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "format/module_info.h"
#include "module/locate.h"
#include "module/module_identity.h"

namespace memtrack {

struct ModuleArtifacts {
  std::vector<ModuleInfo> modules;    // the files exported
  std::vector<std::string> warnings;  // a listed section or symbols file missing or unreadable
};

// Throws std::runtime_error naming the file when DIR/memtrack.metadata is
// missing, not JSON, or not version 1.
ModuleArtifacts read_module_artifacts(const std::string& dir);

// Writes DIR: each file's sections and symbols.map as it is added, then
// memtrack.metadata.
class ModuleArtifactsWriter {
 public:
  // Creates DIR if missing; throws std::runtime_error when it cannot.
  explicit ModuleArtifactsWriter(const std::string& dir);

  // Writes the file's artifacts (none when it was not located) and keeps its
  // metadata entry; returns its key, unique in DIR and made from the
  // recorded identity and first recorded path only (not from what is on
  // disk now). Throws std::runtime_error when a file cannot be written.
  std::string add_file(const ModuleIdentity& identity, const std::string& first_path, const LocatedModule& located);
  // Writes memtrack.metadata: the files added and `processes` (export-modules'
  // per-process placements, keyed by pid).
  void write_metadata(const std::string& artifact, uint64_t start_monotonic_ns, nlohmann::ordered_json processes);

 private:
  std::filesystem::path dir_;
  std::set<std::string> keys_;
  nlohmann::ordered_json files_;
};

}  // namespace memtrack
