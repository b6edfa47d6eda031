// The one ELF file type: every libelf handle memtrack opens (probe sites,
// CFI, module extraction, symbolization, location) is an ElfFile.
//
// Errors are exceptions (ElfError, "<path>: <why>"): most readers
// (probe sites, CFI, export) already failed that way for a whole file, an
// object that exists is always usable (no half-open state to check), and
// the locators that try several candidates catch per candidate and keep the
// message. The readers below tolerate corrupt files instead: missing or
// truncated sections read as absent.
#pragma once

#include <gelf.h>
#include <libelf.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "format/module_info.h"

namespace memtrack {

class UntrustedFile;

// Why an ELF file cannot be used, naming it. error_number() is the errno of
// a failed open (ENOENT: missing), else 0.
class ElfError : public std::runtime_error {
 public:
  ElfError(const std::string& path, const std::string& reason, int error_number = 0)
      : std::runtime_error(path + ": " + reason), reason_(reason), error_number_(error_number) {}
  const std::string& reason() const { return reason_; }  // without the path
  int error_number() const { return error_number_; }

 private:
  std::string reason_;
  int error_number_;
};

class ElfFile {
 public:
  // Opens `path` as an untrusted file (regular files only, never blocks; see
  // io/untrusted_file.h) and maps it read-only. Throws when it cannot be
  // opened or is not an ELF file with readable section headers.
  explicit ElfFile(const std::string& path);
  // The file already open (e.g. checked by its mapping first), owned from now on.
  explicit ElfFile(UntrustedFile file);
  // An ELF image in memory, owned; `name` names it in errors. fd() is -1.
  ElfFile(std::string name, std::vector<char> image);
  ~ElfFile();
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  Elf* elf() const { return elf_; }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // Bytes of the file: libelf trusts header offsets, readers check them
  // against this.
  uint64_t file_size() const { return size_; }

  // Throws ElfError "<path>: <what>[: <libelf error>]".
  [[noreturn]] void fail(std::string_view what, bool with_libelf_error = false) const;

  // The section's bytes lie within the file (libelf maps the file and would
  // read past the end of a truncated one); SHT_NOBITS sections always do.
  bool in_file(const GElf_Shdr& header) const;
  // A section by name with bytes in the file (not SHT_NOBITS, not empty).
  Elf_Scn* section(const char* name, GElf_Shdr* header = nullptr) const;
  bool has_dwarf() const { return section(".debug_info") != nullptr; }
  // The first section extending past the end of the file; empty when none.
  std::string truncated_section() const;

  // The GNU build id: from the SHT_NOTE sections, else (no section headers)
  // the PT_NOTE segments; empty when there is none.
  std::vector<uint8_t> build_id() const;
  std::vector<LoadSegment> load_segments() const;
  // .gnu_debuglink: the name, then the CRC at the next 4-byte boundary.
  std::optional<DebugLink> debug_link() const;
  // The strings the .dynamic entries with tag `tag` name (DT_NEEDED,
  // DT_SONAME), in order; empty when there are none.
  std::vector<std::string> dynamic_strings(int64_t tag) const;
  // The file offset of the code of the dynamic symbol `name` this file
  // defines (the first of its versions); nullopt when it defines none.
  std::optional<uint64_t> dynamic_symbol_offset(std::string_view name) const;

  // `size` bytes at `offset` as the file holds them, into `out`. Code must be
  // read this way, never through libelf's mapping: the kernel writes a uprobe's
  // breakpoint into every executable-capable mapping of the file, ours
  // included, so another tracer's (or another recording's) probes would show
  // as int3 bytes there. Throws ElfError when the range is not in the file.
  void read_bytes(uint64_t offset, uint64_t size, std::vector<uint8_t>& out) const;

 private:
  void open_elf();

  std::string path_;
  int fd_ = -1;
  std::vector<char> image_;
  Elf* elf_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace memtrack
