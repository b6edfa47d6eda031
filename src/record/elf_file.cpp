#include "record/elf_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace memtrack {

ElfFile::ElfFile(std::string path) : path_(std::move(path)) {
  if (elf_version(EV_CURRENT) == EV_NONE) fail("libelf initialisation failed", true);
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail(std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    int err = errno;
    ::close(fd_);
    fd_ = -1;
    fail(std::strerror(err));
  }
  file_size_ = static_cast<uint64_t>(st.st_size);
  // Mapped, not read: libraries can be large and only the symbol tables and
  // a few function bytes are looked at.
  elf_ = elf_begin(fd_, ELF_C_READ_MMAP, nullptr);
  if (elf_ == nullptr || elf_kind(elf_) != ELF_K_ELF) {
    bool had_elf = elf_ != nullptr;
    if (had_elf) elf_end(elf_);
    elf_ = nullptr;
    ::close(fd_);
    fd_ = -1;
    fail("not an ELF file", !had_elf);
  }
}

ElfFile::~ElfFile() {
  if (elf_ != nullptr) elf_end(elf_);
  if (fd_ >= 0) ::close(fd_);
}

void ElfFile::fail(std::string_view what, bool with_libelf_error) const {
  std::string message = path_ + ": " + std::string(what);
  if (with_libelf_error) {
    const char* detail = elf_errmsg(-1);
    if (detail != nullptr) message += std::string(": ") + detail;
  }
  throw std::runtime_error(message);
}

}  // namespace memtrack
