// What an offline unwinder and symbolizer need of one mapped file: the
// content of a Module record (docs/FORMAT.md §2.4), written by
// `record --embed-modules` and read by `export-modules` in place of the file
// on disk. src/export extracts it from ELF files (module_elf.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memtrack {

struct LoadSegment {  // one PT_LOAD
  uint64_t vaddr = 0;
  uint64_t offset = 0;
  uint64_t filesz = 0;
  uint64_t memsz = 0;
  uint32_t flags = 0;  // PF_X 1, PF_W 2, PF_R 4
  bool operator==(const LoadSegment&) const = default;
};

struct SectionBytes {
  uint64_t address = 0;  // sh_addr
  std::vector<uint8_t> bytes;
  bool operator==(const SectionBytes&) const = default;
};

struct DebugLink {  // .gnu_debuglink
  std::string name;
  uint32_t crc = 0;
  bool operator==(const DebugLink&) const = default;
};

struct FunctionSymbol {
  uint64_t address = 0;
  uint64_t size = 0;
  std::string name;
  bool operator==(const FunctionSymbol&) const = default;
};

struct ModuleInfo {
  std::string path;  // where the file was read
  // The file's GNU build id (empty when it has none). The Mapping records
  // the module describes are those with this build id when dev and ino are
  // both 0, else those with this device (kernel encoding) and inode.
  std::vector<uint8_t> build_id;
  uint64_t dev = 0;
  uint64_t ino = 0;
  std::vector<LoadSegment> load_segments;
  std::vector<FunctionSymbol> symbols;  // the symbols.map entries, in its order
  std::optional<SectionBytes> eh_frame;
  std::optional<SectionBytes> eh_frame_hdr;  // only with eh_frame
  std::optional<SectionBytes> debug_frame;   // only without eh_frame
  std::optional<DebugLink> debug_link;
  std::string debug_file;  // the separate debug file found by build id; empty when none
  bool operator==(const ModuleInfo&) const = default;
};

}  // namespace memtrack
