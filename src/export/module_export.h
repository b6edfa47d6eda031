// `memtrack export-modules FILE DIR`: what an offline unwinder and
// symbolizer on another machine needs to resolve a recording's addresses.
// The artifact's Mapping, Fork, Exec and Exit records are replayed into
// placements with time ranges (analyze/module_map.h); each distinct mapped
// file is found on disk by its recorded path, checked to be the file that
// was mapped (build id, else device and inode), and its symbols, CFI and
// load segments are written into DIR keyed per file, with memtrack.metadata
// tying processes, placements and files together. docs/MODULES.md specifies
// the output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "format/event.h"
#include "format/module_info.h"
#include "module/locate.h"

namespace memtrack {

struct ExportResult {
  size_t files = 0;           // distinct mapped files in the recording
  size_t files_exported = 0;  // found, verified and written
  size_t processes = 0;
  size_t placements = 0;
  // Files skipped (changed since the recording, missing, unreadable) and the
  // artifact reader's warnings (truncated, not finalized).
  std::vector<std::string> warnings;
  // A corrupt artifact frame: what was read before it is exported.
  std::optional<std::string> error;

  // memtrack's exit status (README.md): 0 when everything was exported, 1
  // when the artifact is damaged or incomplete or a file was not exported.
  int exit_status() const { return error || !warnings.empty() ? 1 : 0; }
};

// Writes DIR (created if missing). A file the artifact holds a Module record
// for (record --embed-modules) is taken from it, without reading the disk;
// the others are found by the module locator (module/locate.h). Throws
// std::runtime_error when the artifact cannot be opened or has no valid
// header, or when DIR cannot be written.
ExportResult export_modules(const std::string& artifact, const std::string& dir, const LocateOptions& options = {});

// The subcommand: export_modules, warnings and errors on `err`, a summary
// on `out`; returns the exit status.
int run_export_modules(const std::string& artifact, const std::string& dir, std::ostream& out, std::ostream& err);

}  // namespace memtrack
