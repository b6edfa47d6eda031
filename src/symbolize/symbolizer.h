// Symbolization of recorded code addresses: function names (ELF symbol
// tables, or a Module record's symbols) and source file, line and inline
// levels (DWARF, libdw), for addresses given as FILE offsets of a mapped
// file (what the recording's mappings give). Files are found by their
// recorded path under an optional sysroot and checked against the recorded
// identity; separate debug files by build id and .gnu_debuglink.
//
// Not thread-safe: one Symbolizer per thread (libdw and the caches are used
// unsynchronized). open_ahead() opens modules on a thread of its own, each a
// module no other thread touches until symbolize() takes it over.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "format/module_info.h"
#include "module/locate.h"
#include "symbolize/source_frame.h"

namespace memtrack {

// Files are found by the module locator (module/locate.h).
using SymbolizerOptions = LocateOptions;

class Symbolizer {
 public:
  explicit Symbolizer(SymbolizerOptions options = {});
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  using ModuleId = uint32_t;
  // Same identity (module/module_identity.h) → same id. Nothing is opened
  // until the module is first used, and then only once.
  ModuleId add_module(const ModuleRef& module);

  // Starts opening the file of `module` (located, symbols read, debug
  // information indexed) on the Symbolizer's own thread while the caller
  // goes on: the report asks for it as its read first meets each file, so
  // that the files are open when it symbolizes. One not found there is
  // located again at first use, when its embedded record is known.
  void open_ahead(const ModuleRef& module);

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
  class AheadOpener;
  Module& open(ModuleId id);
  SymbolizerOptions options_;
  std::vector<std::unique_ptr<Module>> modules_;
  std::map<ModuleIdentity, ModuleId> ids_;
  std::unique_ptr<AheadOpener> ahead_;  // after options_, which its thread reads
  std::map<ModuleIdentity, std::unique_ptr<Module>> opened_ahead_;  // its work, once joined
};

// Itanium C++ and Rust (legacy, with the hash dropped, and v0) names
// demangled with libiberty; the input unchanged when it is not mangled (or
// not demangleable).
std::string demangle(std::string_view symbol);

}  // namespace memtrack
