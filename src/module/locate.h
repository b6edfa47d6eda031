// The one file locator: where the bytes of a recorded module are now.
// Recorded paths are tried under an optional sysroot (with a " (deleted)"
// suffix dropped), checked against the recorded identity; separate debug
// files are found by build id (<dir>/.build-id/xx/yyyy.debug in each debug
// dir, then <sysroot>/usr/lib/debug) and by .gnu_debuglink. Two policies:
// - locate_module_file, for reading the file now (report): a file whose
//   device or inode differ is still used, with a problem saying so;
// - locate_module, for copying the file (export-modules, --embed-modules):
//   only the very file that was mapped, extracted into a ModuleInfo.
// Module records (embedded, or read back from an export directory by
// module_artifacts.h) stand in for files not found; the caller holds them
// (ModuleRef::embedded).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/module_info.h"
#include "module/module_identity.h"

namespace memtrack {

struct LocateOptions {
  std::string sysroot;  // prefix for recorded paths (reports on another machine); "" = none
  // Searched before <sysroot>/usr/lib/debug: <dir>/.build-id/xx/yyyy.debug,
  // <dir>/<debuglink>, <dir>/<path-dir>/<debuglink>.
  std::vector<std::string> debug_dirs;
};

// What the recording knows of a mapped file.
struct ModuleRef {
  std::string path;
  std::vector<uint8_t> build_id;  // empty when the recording has none
  uint64_t dev = 0, ino = 0;      // kernel encoding (major << 20 | minor)
  // A Module record of the artifact (symbols and CFI, no DWARF), used when
  // the file is not found. Must outlive the users it is given to.
  const ModuleInfo* embedded = nullptr;

  ModuleIdentity identity() const { return mapping_identity(build_id, dev, ino, path); }
};

// Where the bytes of a recorded module are found now. Shared by the
// unwinder and the symbolizer, which read the same file.
struct LocatedFile {
  std::string path;        // the ELF file to read (sysroot applied); empty when not found
  std::string debug_path;  // separate debug file (build id / debuglink), empty when none
  // Why nothing (or only part) was found, naming the paths and the values
  // compared (build id mismatch, debug link CRC mismatch, no debug info);
  // empty when the file and its debug info were found.
  std::string problem;
};

// Looks for the file at <sysroot><path> (and without a " (deleted)" suffix).
// With a recorded build id the file's must be equal; with only dev/ino and
// no sysroot, a file whose device or inode differ is still used (the path is
// all there is) and `problem` says so. Debug info: the file's own
// .debug_info, else by build id (its build id must match), else the
// .gnu_debuglink name (its CRC must match) in the file's directory, its
// .debug subdirectory, then <dir>/<name> and <dir>/<path-dir>/<name> for each
// debug dir.
LocatedFile locate_module_file(const ModuleRef& module, const LocateOptions& options);

// A verified copy of a recorded file.
struct LocatedModule {
  std::optional<ModuleInfo> module;  // when a recorded path holds the mapped file
  std::string path;                  // the path read, or the first recorded
  // When not found: "changed", "missing", "unreadable" or "unverified"
  // (docs/MODULES.md), and why, naming the values compared.
  std::string status;
  std::string reason;
};

// Tries the recorded `paths` (at least one) in order: the first holding the
// file `identity` names (same build id, else the same device and inode as a
// mapping of it shows) gives its load segments, CFI, debug link and
// symbols.map entries (with those of its separate debug file of the same
// build, found by build id).
LocatedModule locate_module(const ModuleIdentity& identity, const std::vector<std::string>& paths,
                            const LocateOptions& options = {});

}  // namespace memtrack
