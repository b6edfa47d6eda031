// Opening files memtrack did not write and cannot trust: named on the
// command line (`info FILE`, `--suppressions`), inside an artifact (Mapping
// and Module paths), in `--modules DIR`'s metadata, or by an ELF file's debug
// link. Such a name may be a FIFO (an open() that never returns), a device
// (/dev/zero: endless bytes), a huge file, or a name that leaves the
// directory it belongs to (`../..`, an absolute name, a symbolic link
// pointing out). Every such file is opened here:
//   O_RDONLY | O_NONBLOCK | O_CLOEXEC (a FIFO or device cannot block the
//   open), then fstat: only regular files, at most `max_bytes` of them.
#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

namespace memtrack {

// Why a file was refused, naming it. error_number() is the errno of a
// failed open (ENOENT: missing), 0 when the file was refused for its type,
// its size or its name.
class UntrustedFileError : public std::runtime_error {
 public:
  UntrustedFileError(const std::string& path, const std::string& reason, int error_number)
      : std::runtime_error(path + ": " + reason), reason_(reason), error_number_(error_number) {}
  const std::string& reason() const { return reason_; }  // without the path
  int error_number() const { return error_number_; }

 private:
  std::string reason_;
  int error_number_;
};

// Files that are mapped rather than read into memory have no size cap.
inline constexpr uint64_t kAnySize = std::numeric_limits<uint64_t>::max();

// An open regular file: the descriptor (closed with the object) and its size
// when it was opened.
class UntrustedFile {
 public:
  // Throws UntrustedFileError: cannot open, not a regular file, or larger
  // than max_bytes.
  static UntrustedFile open(const std::string& path, uint64_t max_bytes);
  // `name` as found in an artifact or metadata, resolved inside `dir` only:
  // absolute names, `..` and symbolic links leading out of `dir` are refused
  // (openat2's RESOLVE_BENEATH), as open() refuses what it refuses.
  static UntrustedFile open_beneath(const std::string& dir, const std::string& name, uint64_t max_bytes);

  UntrustedFile(UntrustedFile&& other) noexcept;
  UntrustedFile& operator=(UntrustedFile&& other) noexcept;
  ~UntrustedFile();

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Hands the descriptor over: the caller closes it.
  int release();
  // The whole file (size() bytes, at most max_bytes); throws
  // UntrustedFileError on a read error or when the file shrank meanwhile.
  std::string read_all() const;

 private:
  UntrustedFile(int fd, uint64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
  static UntrustedFile checked(int fd, const std::string& path, uint64_t max_bytes);

  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_;
};

// Why a recorded path (Mapping, Module or Exec path of an artifact) cannot
// name a file on this machine, or empty when it can: the kernel records
// absolute paths without `.` or `..` components, and nothing else is looked
// up (a hostile artifact could otherwise leave --sysroot).
std::string recorded_path_problem(std::string_view path);

}  // namespace memtrack
