#include "io/untrusted_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace memtrack {

namespace {

constexpr int kOpenFlags = O_RDONLY | O_NONBLOCK | O_CLOEXEC;

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

[[noreturn]] void refuse_open(const std::string& path, int error) {
  throw UntrustedFileError(path, fmt::format("cannot open: {}", std::strerror(error)), error);
}

}  // namespace

UntrustedFile UntrustedFile::checked(int fd, const std::string& path, uint64_t max_bytes) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    throw UntrustedFileError(path, fmt::format("cannot stat: {}", std::strerror(error)), error);
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    throw UntrustedFileError(path, fmt::format("not a regular file ({})", kind_of(info.st_mode)), 0);
  }
  const auto size = static_cast<uint64_t>(info.st_size);
  if (size > max_bytes) {
    ::close(fd);
    throw UntrustedFileError(
        path, fmt::format("{} bytes, more than the {} bytes memtrack reads from such a file", size, max_bytes), 0);
  }
  return UntrustedFile(fd, size, path);
}

UntrustedFile UntrustedFile::open(const std::string& path, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), kOpenFlags);
  if (fd < 0) refuse_open(path, errno);
  return checked(fd, path, max_bytes);
}

UntrustedFile UntrustedFile::open_beneath(const std::string& dir, const std::string& name, uint64_t max_bytes) {
  const std::string path = dir + "/" + name;
  const int dir_fd = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) refuse_open(dir, errno);
  open_how how{};
  how.flags = kOpenFlags;
  // The kernel refuses every way out (an absolute name, `..` above dir, a
  // symbolic link pointing outside), also when dir changes meanwhile.
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  const int fd = static_cast<int>(::syscall(SYS_openat2, dir_fd, name.c_str(), &how, sizeof how));
  const int error = errno;
  ::close(dir_fd);
  if (fd < 0 && error == EXDEV)
    throw UntrustedFileError(path, fmt::format("refused: the name leads out of {}", dir), 0);
  if (fd < 0 && error == ENOSYS) throw UntrustedFileError(path, "cannot open: openat2 needs Linux 5.6 or later", error);
  if (fd < 0) refuse_open(path, error);
  return checked(fd, path, max_bytes);
}

UntrustedFile::UntrustedFile(UntrustedFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), size_(other.size_), path_(std::move(other.path_)) {}

UntrustedFile& UntrustedFile::operator=(UntrustedFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
    path_ = std::move(other.path_);
  }
  return *this;
}

UntrustedFile::~UntrustedFile() {
  if (fd_ >= 0) ::close(fd_);
}

int UntrustedFile::release() { return std::exchange(fd_, -1); }

std::string UntrustedFile::read_all() const {
  std::string bytes(size_, '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pread(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw UntrustedFileError(path_, fmt::format("cannot read: {}", std::strerror(errno)), errno);
    if (n == 0) break;  // shrank since it was opened: what is there
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

std::string recorded_path_problem(std::string_view path) {
  if (path.empty()) return "no path recorded";
  if (path.front() != '/') return fmt::format("{}: not an absolute path (the kernel records no other)", path);
  for (size_t begin = 1; begin <= path.size();) {
    size_t end = path.find('/', begin);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view component = path.substr(begin, end - begin);
    if (component == "." || component == "..")
      return fmt::format("{}: has a '{}' component (the kernel records none): not looked up", path, component);
    begin = end + 1;
  }
  return {};
}

}  // namespace memtrack
