// Internal to src/symbolize: an ELF file open with libelf, and what the
// locator and the symbolizer read from it. Every reader tolerates corrupt
// files (missing or truncated sections read as absent).
#pragma once

#include <gelf.h>
#include <libelf.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "format/module_info.h"

namespace memtrack::symbolize {

// Owns the descriptor and the Elf handle (mapped read-only).
class ElfFile {
 public:
  // nullptr and `error` set (naming `path`) when the path is not a regular
  // file, cannot be opened, or is not an ELF file with readable headers.
  static std::unique_ptr<ElfFile> open(const std::string& path, std::string& error);
  ~ElfFile();
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  Elf* elf() const { return elf_; }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

  std::vector<uint8_t> build_id() const;  // empty when there is no NT_GNU_BUILD_ID note
  std::vector<LoadSegment> load_segments() const;
  std::optional<DebugLink> debug_link() const;
  // A section by name with bytes in the file (not SHT_NOBITS, not empty).
  Elf_Scn* section(const char* name, GElf_Shdr* header = nullptr) const;
  bool has_dwarf() const { return section(".debug_info") != nullptr; }
  // The section's bytes lie within the file (libelf maps the file and would
  // read past the end of a truncated one); SHT_NOBITS sections always do.
  bool in_file(const GElf_Shdr& header) const;
  // The first section extending past the end of the file; empty when none.
  std::string truncated_section() const;

 private:
  ElfFile(int fd, Elf* elf, std::string path, uint64_t size)
      : fd_(fd), elf_(elf), path_(std::move(path)), size_(size) {}
  int fd_;
  Elf* elf_;
  std::string path_;
  uint64_t size_;
};

std::string hex(const std::vector<uint8_t>& bytes);

}  // namespace memtrack::symbolize
