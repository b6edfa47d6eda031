// Symbolization of recorded code addresses: function names (ELF symbol
// tables, or a Module record's symbols) and source file, line and inline
// levels (DWARF, libdw), for addresses given as FILE offsets of a mapped
// file (what the recording's mappings give). Files are found by their
// recorded path under an optional sysroot and checked against the recorded
// identity; separate debug files by build id and .gnu_debuglink.
//
// Not thread-safe: one Symbolizer per thread (libdw and the caches are used
// unsynchronized).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "analyze/profile.h"
#include "format/module_info.h"

namespace memtrack {

struct SymbolizerOptions {
  std::string sysroot;                  // prefix for recorded paths (reports on another machine); "" = none
  // Searched before <sysroot>/usr/lib/debug: <dir>/.build-id/xx/yyyy.debug,
  // <dir>/<debuglink>, <dir>/<path-dir>/<debuglink>.
  std::vector<std::string> debug_dirs;
};

// What the recording knows of a mapped file.
struct ModuleRef {
  std::string path;
  std::vector<uint8_t> build_id;  // empty when the recording has none
  uint64_t dev = 0, ino = 0;      // kernel encoding (major << 20 | minor)
  // A Module record of the artifact (symbols only, no DWARF), used when the
  // file is not found. Must outlive the Symbolizer it is given to.
  const ModuleInfo* embedded = nullptr;
};

// Where the bytes of a recorded module are found now. Shared with the
// unwinder, which needs the same file's CFI.
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
// .debug_info, else <dir>/.build-id/xx/yyyy.debug for each debug dir then
// <sysroot>/usr/lib/debug (its build id must match), else the
// .gnu_debuglink name (its CRC must match) in the file's directory, its
// .debug subdirectory, then <dir>/<name> and <dir>/<path-dir>/<name> for each
// debug dir.
LocatedFile locate_module_file(const ModuleRef& module, const SymbolizerOptions& options);

class Symbolizer {
 public:
  explicit Symbolizer(SymbolizerOptions options = {});
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  using ModuleId = uint32_t;
  // Same identity (build id, else path+dev+ino) → same id. Nothing is opened
  // until the module is first used, and then only once.
  ModuleId add_module(const ModuleRef& module);

  // Source frames of the instruction at `file_offset` of the module's file,
  // innermost inline level first, the containing function last
  // (inlined=false). Callers pass a return address's offset minus 1. Empty
  // when nothing is known. Cached per (module, file offset): each distinct
  // address is symbolized once; the reference stays valid as long as the
  // Symbolizer. An unknown module id gives an empty list.
  const std::vector<SourceFrame>& symbolize(ModuleId module, uint64_t file_offset);

  // What was found for the module (forces the lazy open).
  const LocatedFile& located(ModuleId module);

  // One per opened module not found, or without symbols or debug info.
  std::vector<std::string> warnings() const;

 private:
  struct Module;
  Module& open(ModuleId id);
  SymbolizerOptions options_;
  std::vector<std::unique_ptr<Module>> modules_;
  std::unordered_map<std::string, ModuleId> ids_;  // identity key → id
};

// Itanium C++ and Rust (legacy, with the hash dropped, and v0) names
// demangled with libiberty; the input unchanged when it is not mangled (or
// not demangleable).
std::string demangle(std::string_view symbol);

}  // namespace memtrack
