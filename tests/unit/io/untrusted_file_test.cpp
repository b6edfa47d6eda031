#include "io/untrusted_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/test_support.h"

namespace memtrack {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

// A test that would hang (open() of a FIFO waits for a writer) is killed
// by SIGALRM rather than waiting for ctest's timeout.
class UntrustedFiles : public ::testing::Test {
 protected:
  void SetUp() override { alarm(10); }
  void TearDown() override { alarm(0); }

  void write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_.file(name), std::ios::binary) << text;
  }
  // The reason an open was refused (empty when it was not).
  template <typename Open>
  static std::string refusal(Open open) {
    try {
      open();
    } catch (const UntrustedFileError& e) {
      return e.what();
    }
    return {};
  }

  TempDir dir_;
};

TEST_F(UntrustedFiles, ReadsARegularFile) {
  write("a.txt", "hello");
  UntrustedFile file = UntrustedFile::open(dir_.file("a.txt"), 5);
  EXPECT_EQ(file.size(), 5u);
  EXPECT_EQ(file.read_all(), "hello");
  EXPECT_EQ(file.path(), dir_.file("a.txt"));
}

TEST_F(UntrustedFiles, AFifoIsRefusedWithoutWaitingForAWriter) {
  ASSERT_EQ(mkfifo(dir_.file("fifo").c_str(), 0600), 0);
  EXPECT_EQ(refusal([&] { UntrustedFile::open(dir_.file("fifo"), kAnySize); }),
            dir_.file("fifo") + ": not a regular file (a FIFO)");
}

TEST_F(UntrustedFiles, DevicesAndDirectoriesAreRefused) {
  EXPECT_EQ(refusal([] { UntrustedFile::open("/dev/zero", kAnySize); }),
            "/dev/zero: not a regular file (a character device)");
  EXPECT_EQ(refusal([&] { UntrustedFile::open(dir_.file(""), kAnySize); }),
            dir_.file("") + ": not a regular file (a directory)");
}

TEST_F(UntrustedFiles, FilesAboveTheCapAreRefused) {
  write("big", std::string(101, 'x'));
  EXPECT_EQ(UntrustedFile::open(dir_.file("big"), 101).read_all().size(), 101u);
  EXPECT_EQ(refusal([&] { UntrustedFile::open(dir_.file("big"), 100); }),
            dir_.file("big") + ": 101 bytes, more than the 100 bytes memtrack reads from such a file");
}

TEST_F(UntrustedFiles, AMissingFileSaysSoWithItsErrno) {
  try {
    UntrustedFile::open(dir_.file("absent"), kAnySize);
    FAIL() << "opened a missing file";
  } catch (const UntrustedFileError& e) {
    EXPECT_EQ(e.error_number(), ENOENT);
    EXPECT_EQ(e.reason(), "cannot open: No such file or directory");
  }
}

TEST_F(UntrustedFiles, NamesBeneathADirectoryStayInIt) {
  fs::create_directories(dir_.file("inside/sub"));
  write("inside/sub/a", "a");
  write("outside", "secret");
  fs::create_symlink("sub/a", dir_.file("inside/link-in"));
  fs::create_symlink(dir_.file("outside"), dir_.file("inside/link-out"));
  fs::create_symlink("../outside", dir_.file("inside/link-up"));
  const std::string inside = dir_.file("inside");

  EXPECT_EQ(UntrustedFile::open_beneath(inside, "sub/a", 10).read_all(), "a");
  EXPECT_EQ(UntrustedFile::open_beneath(inside, "link-in", 10).read_all(), "a");  // a link that stays inside
  for (const std::string name : {"../outside", "sub/../../outside", "link-out", "link-up"})
    EXPECT_EQ(refusal([&] { UntrustedFile::open_beneath(inside, name, kAnySize); }),
              inside + "/" + name + ": refused: the name leads out of " + inside)
        << name;
  const std::string absolute = dir_.file("outside");
  EXPECT_NE(refusal([&] { UntrustedFile::open_beneath(inside, absolute, kAnySize); }).find("leads out of"),
            std::string::npos);
  ASSERT_EQ(mkfifo(dir_.file("inside/fifo").c_str(), 0600), 0);
  EXPECT_NE(refusal([&] { UntrustedFile::open_beneath(inside, "fifo", kAnySize); }).find("(a FIFO)"),
            std::string::npos);
}

TEST(RecordedPaths, OnlyAbsolutePathsWithoutDotComponents) {
  EXPECT_EQ(recorded_path_problem("/usr/lib/libc.so.6"), "");
  EXPECT_EQ(recorded_path_problem("/usr/lib/libc.so.6 (deleted)"), "");
  EXPECT_EQ(recorded_path_problem("/opt/a..b/.hidden/x"), "");
  EXPECT_EQ(recorded_path_problem(""), "no path recorded");
  EXPECT_NE(recorded_path_problem("lib/x.so").find("not an absolute path"), std::string::npos);
  EXPECT_NE(recorded_path_problem("[vdso]").find("not an absolute path"), std::string::npos);
  for (const char* path : {"/usr/../../etc/shadow", "/..", "/a/./b", "/a/b/.."})
    EXPECT_NE(recorded_path_problem(path).find("component"), std::string::npos) << path;
}

}  // namespace
}  // namespace memtrack
