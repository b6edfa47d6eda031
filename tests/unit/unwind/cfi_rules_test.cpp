// ModuleCfi: the exact rule at known instructions of hand-written CFI
// (fx_unwind_cfi.S), real Debian files, and files it must refuse.
#include "unwind/cfi_rules.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <latch>
#include <stdexcept>
#include <thread>
#include <vector>

#include "fx_unwind.h"
#include "unwind_test_support.h"

extern "C" void _start();  // the test executable's entry point (crt1)

namespace memtrack {
namespace {

using testing::flag_only;
using testing::make_rule;
using testing::SelfMaps;

using Code = void (*)();

uint64_t address_of(Code fn, uint64_t plus = 0) {
  uint64_t address = reinterpret_cast<uint64_t>(fn);
  // Opaque to the optimizer, which may fold `&f + 9 == &g` to false for
  // distinct symbols.
  __asm__("" : "+r"(address));
  return address + plus;
}

// The bytes at fn + offset, to check an offset names the intended instruction.
std::vector<uint8_t> code_bytes(Code fn, uint64_t offset, size_t count) {
  const auto* p = reinterpret_cast<const uint8_t*>(fn) + offset;
  return {p, p + count};
}

// Rules of libfx_unwind.so, addressed by its functions in this process.
class FixtureCfi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    maps_ = new SelfMaps;
    auto where = maps_->file_offset(address_of(fx_cfi_frame));
    ASSERT_TRUE(where);
    // Addresses taken in a PIE are the library's own, not canonical PLT entries.
    ASSERT_TRUE(where->path.ends_with("/libfx_unwind.so")) << where->path;
    path_ = new std::string(where->path);
    cfi_ = new ModuleCfi(*path_);
  }
  static void TearDownTestSuite() {
    delete cfi_;
    delete path_;
    delete maps_;
  }

  static uint64_t offset(Code fn, uint64_t plus = 0) {
    auto where = maps_->file_offset(address_of(fn, plus));
    if (!where || where->path != *path_) throw std::logic_error("not in libfx_unwind.so");
    return where->offset;
  }
  static std::optional<mt_unwind_rule> pc(Code fn, uint64_t plus = 0) { return cfi_->rule_at_pc(offset(fn, plus)); }
  static std::optional<mt_unwind_rule> ra(Code fn, uint64_t plus) {
    return cfi_->rule_at_return_address(offset(fn, plus));
  }

  static inline SelfMaps* maps_ = nullptr;
  static inline std::string* path_ = nullptr;
  static inline ModuleCfi* cfi_ = nullptr;
};

TEST_F(FixtureCfi, FramePointerFrame) {
  ASSERT_EQ(code_bytes(fx_cfi_frame, 0, 1), std::vector<uint8_t>{0x55});
  ASSERT_EQ(code_bytes(fx_cfi_frame, 1, 3), (std::vector<uint8_t>{0x48, 0x89, 0xe5}));
  ASSERT_EQ(code_bytes(fx_cfi_frame, 4, 4), (std::vector<uint8_t>{0x48, 0x83, 0xec, 0x20}));
  ASSERT_EQ(code_bytes(fx_cfi_frame, 8, 1), std::vector<uint8_t>{0xe8});
  ASSERT_EQ(code_bytes(fx_cfi_frame, 13, 2), (std::vector<uint8_t>{0xc9, 0xc3}));

  EXPECT_EQ(pc(fx_cfi_frame, 0), make_rule(MT_CFA_RSP, 8));
  EXPECT_EQ(pc(fx_cfi_frame, 1), make_rule(MT_CFA_RSP, 16, MT_RULE_RBP_SAVED, -16));
  EXPECT_EQ(pc(fx_cfi_frame, 4), make_rule(MT_CFA_RBP, 16, MT_RULE_RBP_SAVED, -16));
  EXPECT_EQ(ra(fx_cfi_frame, 13), make_rule(MT_CFA_RBP, 16, MT_RULE_RBP_SAVED, -16));
  EXPECT_EQ(pc(fx_cfi_frame, 13), make_rule(MT_CFA_RBP, 16, MT_RULE_RBP_SAVED, -16));
  EXPECT_EQ(pc(fx_cfi_frame, 14), make_rule(MT_CFA_RSP, 8));
  // A return address is looked up inside its call, one byte before: the row
  // of the `leave`, not of the `ret` it points at.
  EXPECT_EQ(ra(fx_cfi_frame, 14), make_rule(MT_CFA_RBP, 16, MT_RULE_RBP_SAVED, -16));
}

TEST_F(FixtureCfi, RspFrameSavingRbp) {
  ASSERT_EQ(code_bytes(fx_cfi_pushes, 0, 2), (std::vector<uint8_t>{0x55, 0x53}));
  ASSERT_EQ(code_bytes(fx_cfi_pushes, 2, 4), (std::vector<uint8_t>{0x48, 0x83, 0xec, 0x28}));
  ASSERT_EQ(code_bytes(fx_cfi_pushes, 6, 1), std::vector<uint8_t>{0xe8});
  ASSERT_EQ(code_bytes(fx_cfi_pushes, 11, 7), (std::vector<uint8_t>{0x48, 0x83, 0xc4, 0x28, 0x5b, 0x5d, 0xc3}));

  EXPECT_EQ(pc(fx_cfi_pushes, 1), make_rule(MT_CFA_RSP, 16, MT_RULE_RBP_SAVED, -16));
  EXPECT_EQ(pc(fx_cfi_pushes, 2), make_rule(MT_CFA_RSP, 24, MT_RULE_RBP_SAVED, -16));
  EXPECT_EQ(ra(fx_cfi_pushes, 11), make_rule(MT_CFA_RSP, 64, MT_RULE_RBP_SAVED, -16));
  EXPECT_EQ(pc(fx_cfi_pushes, 15), make_rule(MT_CFA_RSP, 24, MT_RULE_RBP_SAVED, -16));
  EXPECT_EQ(pc(fx_cfi_pushes, 17), make_rule(MT_CFA_RSP, 8, MT_RULE_RBP_SAVED, -16));
}

TEST_F(FixtureCfi, ReturnAddressAfterNoreturnCallIsTheCallersRule) {
  ASSERT_EQ(code_bytes(fx_cfi_noreturn, 4, 1), std::vector<uint8_t>{0xe8});
  ASSERT_EQ(address_of(fx_cfi_noreturn, 9), address_of(fx_cfi_after_noreturn));

  EXPECT_EQ(ra(fx_cfi_after_noreturn, 0), make_rule(MT_CFA_RSP, 32));
  EXPECT_EQ(pc(fx_cfi_after_noreturn, 0), make_rule(MT_CFA_RSP, 8));
}

TEST_F(FixtureCfi, UndefinedReturnAddressIsOutermost) {
  ASSERT_EQ(code_bytes(fx_cfi_outermost, 2, 1), std::vector<uint8_t>{0xe8});
  ASSERT_EQ(code_bytes(fx_cfi_outermost, 7, 1), std::vector<uint8_t>{0xf4});

  EXPECT_EQ(pc(fx_cfi_outermost, 0), flag_only(MT_RULE_OUTERMOST));
  EXPECT_EQ(ra(fx_cfi_outermost, 7), flag_only(MT_RULE_OUTERMOST));
}

TEST_F(FixtureCfi, SingleRegisterCfaExpressionIsARegisterOffset) {
  EXPECT_EQ(pc(fx_cfi_breg_expression), make_rule(MT_CFA_RSP, 16));
}

TEST_F(FixtureCfi, UndefinedRbpIsUnchanged) { EXPECT_EQ(pc(fx_cfi_rbp_undefined), make_rule(MT_CFA_RSP, 8)); }

TEST_F(FixtureCfi, RulesTheWalkerCannotFollowAreUnsupported) {
  const std::pair<const char*, Code> cases[] = {
      {"plt expression", fx_cfi_plt_expression}, {"r10 CFA", fx_cfi_r10_cfa},
      {"rbp in rbx", fx_cfi_rbp_in_register},    {"rbp expression", fx_cfi_rbp_expression},
      {"RA at CFA-16", fx_cfi_ra_elsewhere},     {"rsp saved", fx_cfi_rsp_saved},
      {"CFA offset > 2^32", fx_cfi_huge_offset},
  };
  for (const auto& [name, fn] : cases) {
    SCOPED_TRACE(name);
    EXPECT_EQ(pc(fn), flag_only(MT_RULE_UNSUPPORTED));
  }
  // Marked as such for the offline unwinder, still UNSUPPORTED for the kernel.
  EXPECT_EQ(pc(fx_cfi_signal_frame), flag_only(MT_RULE_UNSUPPORTED | MT_RULE_SIGNAL_FRAME));
}

// binutils describes .plt entries with a CFA expression (lazy binding
// pushes in the middle of an entry): the walker stops there.
TEST_F(FixtureCfi, LinkerPltEntryIsUnsupported) {
  int32_t rel32;
  std::memcpy(&rel32, reinterpret_cast<const uint8_t*>(fx_cfi_frame) + 9, sizeof rel32);
  const uint64_t plt_entry = address_of(fx_cfi_frame, 13) + static_cast<int64_t>(rel32);
  ASSERT_NE(plt_entry, address_of(fx_cfi_leaf)) << "the call was bound directly, not through the PLT";
  auto where = maps_->file_offset(plt_entry);
  ASSERT_TRUE(where && where->path == *path_);

  EXPECT_EQ(cfi_->rule_at_pc(where->offset), flag_only(MT_RULE_UNSUPPORTED));
  EXPECT_EQ(cfi_->rule_at_pc(where->offset + 11), flag_only(MT_RULE_UNSUPPORTED));
  // The offline unwinder evaluates the expression: rsp + 8 until the entry's
  // push (at +6) has run, rsp + 16 from its jmp to PLT0 (at +11) on.
  EXPECT_EQ(cfi_->offline_rule_at_pc(where->offset), make_rule(MT_CFA_RSP, 8));
  EXPECT_EQ(cfi_->offline_rule_at_pc(where->offset + 10), make_rule(MT_CFA_RSP, 8));
  EXPECT_EQ(cfi_->offline_rule_at_pc(where->offset + 11), make_rule(MT_CFA_RSP, 16));
  EXPECT_EQ(cfi_->offline_rule_at_pc(where->offset + 15), make_rule(MT_CFA_RSP, 16));
}

TEST_F(FixtureCfi, DebugFrameServesCodeWithoutEhFrame) {
  ASSERT_EQ(code_bytes(fx_cfi_debug_frame_only, 0, 3), (std::vector<uint8_t>{0x55, 0x5d, 0xc3}));

  EXPECT_EQ(pc(fx_cfi_debug_frame_only, 0), make_rule(MT_CFA_RSP, 8));
  EXPECT_EQ(pc(fx_cfi_debug_frame_only, 1), make_rule(MT_CFA_RSP, 16, MT_RULE_RBP_SAVED, -16));
  EXPECT_EQ(ra(fx_cfi_debug_frame_only, 2), make_rule(MT_CFA_RSP, 16, MT_RULE_RBP_SAVED, -16));
}

TEST_F(FixtureCfi, CodeWithoutCfiHasNoRule) {
  EXPECT_EQ(pc(fx_cfi_none), std::nullopt);
  EXPECT_EQ(ra(fx_cfi_none, 1), std::nullopt);
}

TEST_F(FixtureCfi, OffsetsOutsideExecutableSegmentsHaveNoRule) {
  const uint64_t file_size = std::filesystem::file_size(*path_);
  EXPECT_EQ(cfi_->rule_at_pc(0), std::nullopt);  // the ELF header: a read-only PT_LOAD
  EXPECT_EQ(cfi_->rule_at_return_address(0), std::nullopt);
  EXPECT_EQ(cfi_->rule_at_pc(file_size + 4096), std::nullopt);
  EXPECT_EQ(cfi_->rule_at_pc(UINT64_MAX), std::nullopt);
}

TEST(ModuleCfi, FileWithoutCfiIsValid) {
  SelfMaps maps;
  auto where = maps.file_offset(address_of(fx_nocfi_function));
  ASSERT_TRUE(where && where->path.ends_with("/libfx_unwind_nocfi.so"));
  ModuleCfi cfi(where->path);
  EXPECT_EQ(cfi.rule_at_pc(where->offset), std::nullopt);
  EXPECT_EQ(cfi.rule_at_return_address(where->offset + 1), std::nullopt);
}

TEST(ModuleCfi, LibcMallocEntry) {
  auto where = SelfMaps().file_offset(reinterpret_cast<uint64_t>(&malloc));
  ASSERT_TRUE(where && where->path.ends_with("/libc.so.6"));
  ModuleCfi libc(where->path);
  EXPECT_EQ(libc.rule_at_pc(where->offset), make_rule(MT_CFA_RSP, 8));
}

TEST(ModuleCfi, ExecutableStartIsOutermost) {
  auto where = SelfMaps().file_offset(reinterpret_cast<uint64_t>(&_start));
  ASSERT_TRUE(where);
  ModuleCfi exe(where->path);
  EXPECT_EQ(exe.rule_at_pc(where->offset), flag_only(MT_RULE_OUTERMOST));
}

// glibc's __restore_rt: a signal frame (and CFA expression) the walker
// cannot follow; the FDE starts one byte early, so both lookups see it.
TEST(ModuleCfi, LibcSignalTrampolineIsAnUnsupportedSignalFrame) {
  struct sigaction handler = {}, installed = {}, previous = {};
  handler.sa_handler = [](int) {};
  ASSERT_EQ(sigaction(SIGUSR2, &handler, &previous), 0);
  ASSERT_EQ(sigaction(SIGUSR2, nullptr, &installed), 0);
  ASSERT_EQ(sigaction(SIGUSR2, &previous, nullptr), 0);
  auto where = SelfMaps().file_offset(reinterpret_cast<uint64_t>(installed.sa_restorer));
  ASSERT_TRUE(where && where->path.ends_with("/libc.so.6"));

  ModuleCfi libc(where->path);
  EXPECT_EQ(libc.rule_at_pc(where->offset), flag_only(MT_RULE_UNSUPPORTED | MT_RULE_SIGNAL_FRAME));
  EXPECT_EQ(libc.rule_at_return_address(where->offset), flag_only(MT_RULE_UNSUPPORTED | MT_RULE_SIGNAL_FRAME));
}

// A file that exists only as a memfd: reachable by path, never on disk.
class MemFile {
 public:
  explicit MemFile(const std::vector<char>& bytes) : fd_(memfd_create("unwind-test", MFD_CLOEXEC)) {
    if (fd_ < 0 || write(fd_, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size()))
      throw std::runtime_error("memfd");
  }
  ~MemFile() { close(fd_); }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

void expect_refused(const std::string& path, const std::string& reason) {
  try {
    ModuleCfi cfi(path);
    ADD_FAILURE() << path << " was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": " + reason);
  }
}

TEST(ModuleCfi, RefusesMissingAndNonElfFiles) {
  expect_refused("/nonexistent/libnothing.so", "cannot open: No such file or directory");
  expect_refused(MemFile({'h', 'e', 'l', 'l', 'o', '\n'}).path(), "not an ELF file");
}

// The first `size` bytes of this process's libc.so.6.
std::vector<char> libc_head(size_t size) {
  std::ifstream in(SelfMaps().file_offset(reinterpret_cast<uint64_t>(&malloc))->path, std::ios::binary);
  std::vector<char> head(size);
  if (!in.read(head.data(), static_cast<std::streamsize>(size))) throw std::runtime_error("cannot read libc");
  return head;
}

TEST(ModuleCfi, RefusesOtherArchitectures) {
  std::vector<char> elf = libc_head(4096);
  const uint16_t aarch64 = 183;  // EM_AARCH64, in e_machine (offset 18)
  std::memcpy(elf.data() + 18, &aarch64, sizeof aarch64);
  expect_refused(MemFile(elf).path(), "not an x86-64 ELF file");
}

// Program headers past the end of the file.
TEST(ModuleCfi, TruncatedElfIsRefused) {
  MemFile truncated(libc_head(300));
  try {
    ModuleCfi cfi(truncated.path());
    ADD_FAILURE() << "a 300-byte libc was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with(truncated.path() + ": unreadable program headers")) << e.what();
  }
}

// The rules of many return addresses at once (the learner prepares a file's
// that way) are those of one lookup each, in order: in every byte of the
// fixture's code (hand-written CFI, .debug_frame only, no CFI, a signal
// frame, .plt) and densely over libc's, where a CFI row holds many offsets.
TEST(ModuleCfi, RulesOfManyReturnAddressesAreThoseOfOneLookupEach) {
  const SelfMaps maps;
  for (uint64_t code : {address_of(fx_cfi_frame), reinterpret_cast<uint64_t>(&malloc)}) {
    const testing::SelfMapping* text = maps.find(code);
    ASSERT_TRUE(text);
    ModuleCfi cfi(text->path);
    uint64_t length = std::min<uint64_t>(text->end - text->start, 256 << 10);
    uint64_t stride = text->path.ends_with("/libfx_unwind.so") ? 1 : 3;
    std::vector<uint64_t> offsets;
    for (uint64_t o = text->offset; o <= text->offset + length; o += stride) offsets.push_back(o);
    offsets.push_back(0);  // no call ends there
    std::vector<std::optional<mt_unwind_rule>> batch = cfi.rules_at_return_addresses(offsets);
    ASSERT_EQ(batch.size(), offsets.size());
    size_t mismatches = 0, found = 0;
    for (size_t i = 0; i < offsets.size(); ++i) {
      std::optional<mt_unwind_rule> one = cfi.rule_at_return_address(offsets[i]);
      mismatches += batch[i] != one;
      found += one.has_value();
    }
    EXPECT_EQ(mismatches, 0u) << text->path;
    EXPECT_GT(found, offsets.size() / 10) << text->path;  // not a sample without CFI
  }
}

// libdw 0.188 fills its CIE/FDE caches on lookup, unsynchronized: lookups
// racing on a fresh module must give what serial ones give (and not crash).
TEST(ModuleCfi, ConcurrentLookupsAgreeWithSerialOnes) {
  const SelfMaps maps;
  auto where = maps.file_offset(reinterpret_cast<uint64_t>(&malloc));
  ASSERT_TRUE(where);
  const testing::SelfMapping* text = maps.find(reinterpret_cast<uint64_t>(&malloc));
  std::vector<uint64_t> offsets;
  for (uint64_t o = text->offset; o < text->offset + (text->end - text->start); o += 61) offsets.push_back(o);

  std::vector<std::optional<mt_unwind_rule>> serial;
  {
    ModuleCfi libc(where->path);
    for (uint64_t o : offsets) serial.push_back(libc.rule_at_return_address(o));
  }
  ModuleCfi libc(where->path);
  std::vector<int> mismatches(4, 0);
  std::latch start(static_cast<std::ptrdiff_t>(mismatches.size()));
  std::vector<std::thread> threads;
  for (size_t t = 0; t < mismatches.size(); ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();  // all at once, on the same cold caches
      for (size_t i = t; i < offsets.size(); ++i)
        if (libc.rule_at_return_address(offsets[i]) != serial[i]) ++mismatches[t];
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
  // The sample hit real code: most of it has CFI, and not only entry rules.
  EXPECT_GT(std::count_if(serial.begin(), serial.end(), [](const auto& r) { return r.has_value(); }),
            static_cast<long>(offsets.size() / 2));
  EXPECT_TRUE(std::any_of(serial.begin(), serial.end(), [](const auto& r) { return r && r->cfa_offset > 8; }));
}

}  // namespace
}  // namespace memtrack
