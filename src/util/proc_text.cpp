#include "util/proc_text.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <sstream>

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

pid_t parent_of(pid_t pid) {
  std::string text = read_proc_text("/proc/" + std::to_string(pid) + "/stat").value_or("");
  size_t close = text.rfind(')');  // the comm may hold any character
  if (close == std::string::npos || close + 2 > text.size()) return 0;
  std::istringstream rest(text.substr(close + 2));
  char state;
  pid_t ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

}  // namespace memtrack
