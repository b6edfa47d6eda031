// read_proc_text (src/util/proc_text.h): a /proc file of a process that
// exits while it is read is "gone", never an exception.
#include "util/proc_text.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

namespace memtrack {
namespace {

pid_t sleeping_child() {
  pid_t pid = fork();
  if (pid == 0) {
    pause();
    _exit(0);
  }
  return pid;
}

void end(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(ProcText, ReadsALiveProcessFile) {
  pid_t child = sleeping_child();
  ASSERT_GT(child, 0);
  auto text = read_proc_text("/proc/" + std::to_string(child) + "/stat");
  end(child);
  ASSERT_TRUE(text.has_value());
  EXPECT_EQ(text->rfind(std::to_string(child) + " (", 0), 0u) << *text;
}

TEST(ProcText, AProcessGoneBetweenOpenAndReadIsNotAnException) {
  pid_t child = sleeping_child();
  ASSERT_GT(child, 0);
  const std::string path = "/proc/" + std::to_string(child) + "/stat";
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  std::ifstream stream(path);
  end(child);
  ASSERT_GE(fd, 0);
  // What the recorder's guardian and the tests did (CI failed on it: "basic_filebuf::underflow error reading
  // the file: No such process").
  EXPECT_THROW(std::string((std::istreambuf_iterator<char>(stream)), std::istreambuf_iterator<char>()),
               std::ios_base::failure);
  EXPECT_FALSE(read_fd_text(fd).has_value());
  close(fd);
  EXPECT_FALSE(read_proc_text(path).has_value());
}

}  // namespace
}  // namespace memtrack
