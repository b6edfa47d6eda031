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

#include <compare>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "format/event.h"
#include "format/module_info.h"

namespace memtrack {

struct ExportOptions {
  // Separate debug files are looked up as <debug_root>/.build-id/xx/yyyy.debug.
  std::string debug_root = "/usr/lib/debug";
};

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

// A mapped file as the recording identifies it: by build id when its
// Mapping records have one, else by device and inode.
struct ModuleIdentity {
  std::vector<uint8_t> build_id;
  uint64_t dev = 0;
  uint64_t ino = 0;
  auto operator<=>(const ModuleIdentity&) const = default;
};

ModuleIdentity identity_of(const MappingInfo& mapping);
// The Mapping records' identity a Module record describes.
ModuleIdentity identity_of(const ModuleInfo& module);

// What export-modules writes for one file, found on disk.
struct LocatedModule {
  std::optional<ModuleInfo> module;  // when a recorded path holds the mapped file
  std::string path;                  // the path read, or the first recorded
  // When not found: "changed", "missing", "unreadable" or "unverified"
  // (docs/MODULES.md), and why, naming the values compared.
  std::string status;
  std::string reason;
};

// Tries the recorded `paths` (at least one) in order: the first holding the
// file `identity` names gives its load segments, CFI, debug link and
// symbols.map entries (with those of its separate debug file).
LocatedModule locate_module(const ModuleIdentity& identity, const std::vector<std::string>& paths,
                            const ExportOptions& options = {});

// Writes DIR (created if missing). A file the artifact holds a Module record
// for (record --embed-modules) is taken from it, without reading the disk. Throws std::runtime_error when the
// artifact cannot be opened or has no valid header, or when DIR cannot be
// written.
ExportResult export_modules(const std::string& artifact, const std::string& dir, const ExportOptions& options = {});

// The subcommand: export_modules, warnings and errors on `err`, a summary
// on `out`; returns the exit status.
int run_export_modules(const std::string& artifact, const std::string& dir, std::ostream& out, std::ostream& err);

}  // namespace memtrack
