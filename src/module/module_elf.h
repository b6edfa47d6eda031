// What an offline unwinder and symbolizer need from one ELF file, read with
// libelf: its build id, load segments, CFI sections, debug link and function
// symbols. Addresses are link-time (as in the file), never biased.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/module_info.h"
#include "module/elf_file.h"

namespace memtrack {

struct ElfModule {
  std::vector<uint8_t> build_id;  // empty when the file has no GNU build id note
  std::vector<LoadSegment> load_segments;
  // Absent when the section is missing, empty or has no bytes in the file
  // (SHT_NOBITS, as in separate debug files). A compressed .debug_frame is
  // decompressed.
  std::optional<SectionBytes> eh_frame, eh_frame_hdr, debug_frame;
  std::optional<DebugLink> debug_link;
  // Defined STT_FUNC and STT_GNU_IFUNC symbols of .symtab and .dynsym, as
  // found (unsorted, duplicates kept); unnamed and ARM/AArch64 mapping
  // symbols ($x, $d.foo, ...) left out.
  std::vector<FunctionSymbol> symbols;
};

// Reads the ELF file. Throws std::runtime_error naming the file when its
// headers cannot be read.
ElfModule read_elf_module(const ElfFile& file);
// Opens `path` first (ElfFile's errors).
ElfModule read_elf_module(const std::string& path);

// The symbols.map rules (perf's): sorted by address then name, one entry per
// (address, name) keeping the largest size, zero-size symbols extended to the
// next higher symbol address, the last one to the next 4 KiB boundary plus
// 4 KiB.
std::vector<FunctionSymbol> symbol_map(std::vector<FunctionSymbol> symbols);

// The load bias of a mapping of the file at `start` from `file_offset`
// (page-aligned, as the kernel maps): start - (p_vaddr + file_offset -
// p_offset) for the PT_LOAD whose pages hold that offset, an executable one
// first when the mapping is executable (a read-only segment may share the
// page where the code segment starts). nullopt when no PT_LOAD holds it.
std::optional<uint64_t> load_bias(const std::vector<LoadSegment>& segments, uint64_t start, uint64_t file_offset,
                                  bool executable, uint64_t page_size);

}  // namespace memtrack
