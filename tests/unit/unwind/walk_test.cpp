// Cross-check: walk a copy of this thread's stack with the rules, as the
// in-kernel walker does, and compare with glibc's backtrace() (libgcc's
// unwinder) of the same moment, frame for frame up to _start.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fx_unwind.h"
#include "unwind/cfi_rules.h"
#include "unwind_test_support.h"

extern "C" void _start();  // the test executable's entry point (crt1)

namespace memtrack {
namespace {

using testing::make_rule;
using testing::SelfMaps;

constexpr int kDepth = 5;  // fx_walk_fp(5) .. fx_walk_nofp(0): three frames of each

fx_capture capture;  // 64 KiB: not on the stack it copies

// The innermost function whose symbol covers `address`, or "".
std::string symbol_at(uint64_t address) {
  Dl_info info{};
  return dladdr(reinterpret_cast<void*>(address), &info) && info.dli_sname ? info.dli_sname : "";
}

TEST(CfiWalk, MatchesBacktraceFrameForFrame) {
  const SelfMaps maps;
  const testing::SelfMapping* stack = maps.find_named("[stack]");
  ASSERT_NE(stack, nullptr);
  fx_walk_fp(kDepth, &capture, stack->end);
  ASSERT_GT(capture.frames, 1);
  ASSERT_LT(capture.frames, static_cast<int>(std::size(capture.backtrace))) << "backtrace() was cut short";
  ASSERT_EQ(symbol_at(capture.pc), "fx_capture_stack");

  auto read_word = [&](uint64_t address, uint64_t* word) {
    if (address < capture.rsp || address - capture.rsp + 8 > capture.size) return false;
    std::memcpy(word, capture.stack + (address - capture.rsp), 8);
    return true;
  };

  std::map<std::string, std::unique_ptr<ModuleCfi>> modules;
  auto module = [&](const std::string& path) -> const ModuleCfi& {
    auto& slot = modules[path];
    if (!slot) slot = std::make_unique<ModuleCfi>(path);
    return *slot;
  };

  std::vector<uint64_t> walked;  // return addresses, caller of fx_capture_stack first
  int fp_frames = 0, nofp_frames = 0;
  uint64_t pc = capture.pc, rsp = capture.rsp, rbp = capture.rbp;
  bool outermost = false;
  for (bool innermost = true; walked.size() < std::size(capture.backtrace); innermost = false) {
    auto where = innermost ? maps.file_offset(pc) : maps.return_address_offset(pc);
    ASSERT_TRUE(where) << std::hex << pc << " is in no file";
    const ModuleCfi& cfi = module(where->path);
    auto rule = innermost ? cfi.rule_at_pc(where->offset) : cfi.rule_at_return_address(where->offset);
    ASSERT_TRUE(rule) << "no CFI for " << where->path << " +0x" << std::hex << where->offset;
    if (rule->flags & MT_RULE_OUTERMOST) {
      outermost = true;
      break;
    }
    ASSERT_FALSE(rule->flags & MT_RULE_UNSUPPORTED) << where->path << " +0x" << std::hex << where->offset;

    // The C fixtures' known prologues, checked where they occur in the walk.
    const std::string function = symbol_at(innermost ? pc : pc - 1);
    if (function == "fx_walk_fp") {
      ++fp_frames;
      EXPECT_EQ(rule, make_rule(MT_CFA_RBP, 16, MT_RULE_RBP_SAVED, -16));
    } else if (function == "fx_walk_nofp") {
      ++nofp_frames;
      EXPECT_EQ(rule->cfa_reg, MT_CFA_RSP);
      EXPECT_GE(rule->cfa_offset, 8 + 200);  // the return address and `pad`
    }

    const uint64_t cfa = (rule->cfa_reg == MT_CFA_RBP ? rbp : rsp) + static_cast<int64_t>(rule->cfa_offset);
    ASSERT_GT(cfa, rsp) << "the stack grows down: a caller's frame is above";
    uint64_t return_address = 0;
    ASSERT_TRUE(read_word(cfa - 8, &return_address)) << "the walk left the copied stack";
    if (rule->flags & MT_RULE_RBP_SAVED) {
      ASSERT_TRUE(read_word(cfa + static_cast<int64_t>(rule->rbp_offset), &rbp));
    }
    rsp = cfa;
    pc = return_address;
    walked.push_back(return_address);
  }
  EXPECT_TRUE(outermost) << "the walk did not reach a frame without caller";
  EXPECT_EQ(fp_frames, 3);
  EXPECT_EQ(nofp_frames, 3);

  // backtrace()[0] is fx_capture_stack's own call of backtrace.
  std::vector<uint64_t> expected;
  for (int i = 1; i < capture.frames; ++i) expected.push_back(reinterpret_cast<uint64_t>(capture.backtrace[i]));
  EXPECT_EQ(walked, expected);
  ASSERT_FALSE(walked.empty());
  // The last frame is the executable's entry point (not in .dynsym: dladdr cannot name it).
  const uint64_t entry = reinterpret_cast<uint64_t>(&_start);
  EXPECT_TRUE(walked.back() > entry && walked.back() - entry < 64) << std::hex << walked.back() << " vs " << entry;
}

}  // namespace
}  // namespace memtrack
