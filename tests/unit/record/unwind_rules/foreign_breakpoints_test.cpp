// Another tracer's uprobes (a second recording, perf, bpftrace) put an int3
// into every mapping of the probed file that may execute, read-only mappings
// included. What the recorder learns from a file's code (probe placement,
// call sites) must come from the file's bytes, not from such a mapping. CI
// caught this: a recorder test running beside probe_sites_test made libc's
// calloc look like it started with int3.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "record/probes/allocator_symbols.h"
#include "record/unwind_rules/call_sites.h"

namespace memtrack {
namespace {

constexpr const char* kLibc = "/lib/x86_64-linux-gnu/libc.so.6";

// A private copy of libc: breakpoints on it reach no other process.
class LibcCopy {
 public:
  LibcCopy() {
    std::string pattern = (std::filesystem::temp_directory_path() / "memtrack-foreign-bp-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
    dir_ = pattern;
    path_ = dir_ + "/libc.so.6";
    std::filesystem::copy_file(kLibc, path_);
  }
  ~LibcCopy() { std::filesystem::remove_all(dir_); }
  const std::string& path() const { return path_; }
  bool on_noexec_mount() const {
    struct statvfs fs {};
    return statvfs(dir_.c_str(), &fs) == 0 && (fs.f_flag & ST_NOEXEC);
  }

 private:
  std::string dir_, path_;
};

// System-wide uprobes through perf, as `perf probe -x` sets them; closed at
// the end of the test, which removes them.
class ForeignUprobes {
 public:
  ~ForeignUprobes() {
    for (int fd : fds_) close(fd);
  }
  // 0, or the errno of a refusal.
  int add(const std::string& path, uint64_t offset) {
    std::ifstream type_file("/sys/bus/event_source/devices/uprobe/type");
    int type = -1;
    if (!(type_file >> type)) return ENOENT;
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = static_cast<uint32_t>(type);
    attr.config1 = reinterpret_cast<uint64_t>(path.c_str());
    attr.config2 = offset;
    int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) return errno;
    fds_.push_back(fd);
    return 0;
  }

 private:
  std::vector<int> fds_;
};

bool privileges_missing(int error) { return error == EACCES || error == EPERM || error == ENOENT; }

// The byte a read-only private mapping of the file shows at `offset`: the
// breakpoints are real there (what libelf's mapping would have read).
uint8_t mapped_byte(const std::string& path, uint64_t offset) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": " + std::strerror(errno));
  const off_t size = lseek(fd, 0, SEEK_END);
  void* map = mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) throw std::runtime_error(path + ": mmap: " + std::strerror(errno));
  const uint8_t byte = static_cast<const uint8_t*>(map)[offset];
  munmap(map, static_cast<size_t>(size));
  return byte;
}

#define SKIP_WITHOUT_PRIVILEGES(error)                                                                     \
  if (privileges_missing(error))                                                                           \
  GTEST_SKIP() << "SKIPPED: cannot set a system-wide uprobe (" << std::strerror(error)                     \
               << "): needs CAP_PERFMON and the uprobe PMU; this test checks nothing here"

TEST(ForeignBreakpoints, ProbePlacementReadsTheFileNotAMapping) {
  LibcCopy copy;
  if (copy.on_noexec_mount()) GTEST_SKIP() << "SKIPPED: the temp directory is noexec; set TMPDIR elsewhere";
  const std::vector<ProbeSite> clean = find_probe_sites(copy.path());
  ASSERT_FALSE(clean.empty());

  ForeignUprobes foreign;
  std::set<uint64_t> offsets;
  for (const ProbeSite& s : clean) offsets.insert({s.symbol_offset, s.probe_offset});
  for (uint64_t offset : offsets) {
    int error = foreign.add(copy.path(), offset);
    SKIP_WITHOUT_PRIVILEGES(error);
    ASSERT_EQ(error, 0) << "uprobe at " << offset << ": " << std::strerror(error);
  }
  ASSERT_EQ(mapped_byte(copy.path(), clean.front().symbol_offset), 0xcc) << "no breakpoint in a mapping: the test shows nothing";

  const std::vector<ProbeSite> probed = find_probe_sites(copy.path());
  ASSERT_EQ(probed.size(), clean.size());
  for (std::size_t i = 0; i < clean.size(); ++i) {
    SCOPED_TRACE(clean[i].symbol);
    EXPECT_EQ(probed[i].symbol_offset, clean[i].symbol_offset);
    EXPECT_EQ(probed[i].probe_offset, clean[i].probe_offset);
    EXPECT_EQ(probed[i].placement, clean[i].placement);
  }
}

TEST(ForeignBreakpoints, CallSitesReadTheFileNotAMapping) {
  LibcCopy copy;
  if (copy.on_noexec_mount()) GTEST_SKIP() << "SKIPPED: the temp directory is noexec; set TMPDIR elsewhere";
  const std::vector<uint64_t> clean = return_address_offsets(copy.path());
  std::ifstream in(copy.path(), std::ios::binary);
  const std::vector<char> file{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};

  // Breakpoints on some `call rel32` instructions: the kernel refuses an
  // E8 that is not an instruction's start only if it cannot decode there.
  ForeignUprobes foreign;
  std::vector<uint64_t> calls;
  for (std::size_t i = 0; i < clean.size() && calls.size() < 8; i += clean.size() / 64) {
    const uint64_t call = clean[i] - 5;
    if (static_cast<uint8_t>(file[call]) != 0xe8) continue;
    int error = foreign.add(copy.path(), call);
    SKIP_WITHOUT_PRIVILEGES(error);
    if (error == 0) calls.push_back(call);
  }
  ASSERT_FALSE(calls.empty());
  ASSERT_EQ(mapped_byte(copy.path(), calls.front()), 0xcc) << "no breakpoint in a mapping: the test shows nothing";

  EXPECT_EQ(return_address_offsets(copy.path()), clean);
}

}  // namespace
}  // namespace memtrack
