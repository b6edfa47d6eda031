// Reads what `memtrack export-modules` wrote (docs/MODULES.md) back into
// ModuleInfo records, so a report on another machine can unwind and name the
// frames of files it does not have: `memtrack report --modules DIR`.
#pragma once

#include <string>
#include <vector>

#include "format/module_info.h"

namespace memtrack {

struct ModuleArtifacts {
  std::vector<ModuleInfo> modules;    // the files exported
  std::vector<std::string> warnings;  // a listed section or symbols file missing or unreadable
};

// Throws std::runtime_error naming the file when DIR/memtrack.metadata is
// missing, not JSON, or not version 1.
ModuleArtifacts read_module_artifacts(const std::string& dir);

}  // namespace memtrack
