#include "util/proc_text.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

namespace memtrack {

std::optional<std::string> read_fd_text(int fd) {
  std::string text;
  char buffer[4096];
  for (;;) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n == 0) return text;
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::nullopt;
    }
    text.append(buffer, static_cast<size_t>(n));
  }
}

std::optional<std::string> read_proc_text(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> text = read_fd_text(fd);
  close(fd);
  return text;
}

}  // namespace memtrack
