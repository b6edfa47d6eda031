// A read-only libelf handle on one file, closed on destruction.
#pragma once

#include <libelf.h>

#include <string>
#include <string_view>

namespace memtrack {

class ElfFile {
 public:
  // Opens `path` and checks it is an ELF file; throws std::runtime_error
  // naming the file otherwise.
  explicit ElfFile(std::string path);
  ~ElfFile();
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  Elf* elf() const { return elf_; }
  const std::string& path() const { return path_; }
  // Size of the file on disk: libelf trusts header offsets, callers check
  // them against this.
  uint64_t file_size() const { return file_size_; }

  // Throws std::runtime_error "<path>: <what>[: <libelf error>]".
  [[noreturn]] void fail(std::string_view what, bool with_libelf_error = false) const;

 private:
  std::string path_;
  int fd_ = -1;
  Elf* elf_ = nullptr;
  uint64_t file_size_ = 0;
};

}  // namespace memtrack
