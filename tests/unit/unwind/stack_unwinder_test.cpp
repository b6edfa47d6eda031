// The offline unwinders (StackUnwinder, ours; DwflUnwinder, libdwfl's) on
// copies of this thread's stack taken in-process by libfx_unwind: each chain
// must equal glibc's backtrace() (libgcc's unwinder) of the same moment frame
// for frame, and the two unwinders must agree; cut, corrupted and garbage
// copies must end with a stop reason that says why, never crash or loop.
#include <dlfcn.h>
#include <execinfo.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "fx_unwind.h"
#include "module/module_elf.h"
#include "unwind/dwfl_unwinder.h"
#include "unwind/stack_unwinder.h"
#include "unwind_test_support.h"

// An unwind of a recorded copy through the unwinder's signature (registers,
// code map, a cache of its own, the copy as stack memory).
inline memtrack::UnwoundStack unwind_copy(const memtrack::StackUnwinder& unwinder, const memtrack::StackDefinition& d,
                                          const memtrack::CodeMap& code) {
  memtrack::UnwindCache cache;
  return unwinder.unwind(d.regs, code, cache, memtrack::StackCopy(d.sp, d.bytes, d.truncated));
}


extern "C" void _start();  // the test executable's entry point (crt1)

namespace memtrack {
namespace {

using testing::SelfMaps;

fx_capture capture;  // 64 KiB: not on the stack it copies

// This process's executable mappings as the unwinders see them: one
// UnwindModule per file (null when it cannot be opened, and for [vdso]).
class SelfCodeMap : public CodeMap {
 public:
  // `hidden`: mappings of a path ending so are left out (NoModule);
  // `without_cfi`: they are kept with a null module.
  explicit SelfCodeMap(const std::string& hidden = "", const std::string& without_cfi = "") {
    for (const MapEntry& e : read_maps_file("/proc/self/maps")) {
      if (!e.executable()) continue;
      if (!hidden.empty() && e.path.ends_with(hidden)) continue;
      CodeRange r;
      r.start = e.start;
      r.end = e.end;
      r.file_offset = e.offset;
      if (e.path.starts_with('/') && (without_cfi.empty() || !e.path.ends_with(without_cfi))) r.module = module(e.path);
      ranges_.push_back(r);
      mappings_.push_back({e.path, r.start, r.end, e.offset});
    }
    std::sort(ranges_.begin(), ranges_.end(), [](const CodeRange& a, const CodeRange& b) { return a.start < b.start; });
  }

  const CodeRange* find(uint64_t address) const override {
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), address,
                               [](uint64_t a, const CodeRange& r) { return a < r.start; });
    if (it == ranges_.begin()) return nullptr;
    --it;
    return address < it->end ? &*it : nullptr;
  }

  const std::vector<DwflMapping>& mappings() const { return mappings_; }
  const std::map<std::string, std::unique_ptr<UnwindModule>>& modules() const { return modules_; }

  // Replaces every module by one built from the file's Module record content.
  void use_module_records() {
    std::map<const UnwindModule*, const UnwindModule*> replaced;
    for (auto& [path, module] : modules_) {
      if (!module) continue;
      auto from_record = UnwindModule::from_module_info(module_info(path));
      replaced[module.get()] = from_record.get();
      records_.push_back(std::move(from_record));
    }
    for (CodeRange& r : ranges_)
      if (r.module) r.module = replaced.at(r.module);
  }

  // What `record --embed-modules` keeps of a file (format/module_info.h).
  static ModuleInfo module_info(const std::string& path) {
    ElfModule elf = read_elf_module(path);
    ModuleInfo info;
    info.path = path;
    info.load_segments = elf.load_segments;
    info.eh_frame = elf.eh_frame;
    info.eh_frame_hdr = elf.eh_frame_hdr;
    info.debug_frame = elf.debug_frame;
    return info;
  }

 private:
  const UnwindModule* module(const std::string& path) {
    auto& slot = modules_[path];
    if (!slot) {
      try {
        slot = std::make_unique<UnwindModule>(path);
      } catch (const std::runtime_error&) {
        return nullptr;  // mapped, but no CFI for it
      }
    }
    return slot.get();
  }

  std::vector<CodeRange> ranges_;
  std::vector<DwflMapping> mappings_;
  std::map<std::string, std::unique_ptr<UnwindModule>> modules_;
  std::vector<std::unique_ptr<UnwindModule>> records_;
};

uint64_t stack_end() {
  const SelfMaps maps;  // the mapping found points into it
  const testing::SelfMapping* stack = maps.find_named("[stack]");
  if (!stack) throw std::runtime_error("no [stack] in /proc/self/maps");
  return stack->end;
}

// The capture as the kernel records a raw stack: rip, rsp and rbp set.
StackDefinition definition_of(const fx_capture& c) {
  StackDefinition d;
  d.sp = c.rsp;
  d.regs.assign(17, 0);
  d.regs[16] = c.pc;
  d.regs[7] = c.rsp;
  d.regs[6] = c.rbp;
  d.bytes.assign(c.stack, c.stack + c.size);
  d.truncated = c.size == sizeof c.stack;
  return d;
}

// backtrace()'s return addresses after its own frame in fx_capture_stack.
std::vector<uint64_t> backtrace_callers(const fx_capture& c) {
  std::vector<uint64_t> v;
  for (int i = 1; i < c.frames; ++i) v.push_back(reinterpret_cast<uint64_t>(c.backtrace[i]));
  return v;
}

std::string symbol_at(uint64_t address) {
  Dl_info info{};
  return dladdr(reinterpret_cast<void*>(address), &info) && info.dli_sname ? info.dli_sname : "";
}

bool is_prefix(const std::vector<uint64_t>& prefix, const std::vector<uint64_t>& of) {
  return prefix.size() <= of.size() && std::equal(prefix.begin(), prefix.end(), of.begin());
}

::testing::AssertionResult ends_in_start(const std::vector<uint64_t>& chain) {
  const uint64_t entry = reinterpret_cast<uint64_t>(&_start);
  if (!chain.empty() && chain.back() > entry && chain.back() - entry < 64) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "the chain does not end in _start";
}

class CapturedStacks : public ::testing::Test {
 protected:
  // The full unwind of the capture by both unwinders, checked against
  // backtrace(); returns ours.
  UnwoundStack unwind_and_compare(const SelfCodeMap& map) {
    EXPECT_GT(capture.frames, 1);
    EXPECT_LT(capture.frames, static_cast<int>(std::size(capture.backtrace))) << "backtrace() was cut short";
    EXPECT_EQ(symbol_at(capture.pc), "fx_capture_stack");
    const StackDefinition d = definition_of(capture);
    UnwoundStack own = unwind_copy(StackUnwinder(), d, map);
    EXPECT_EQ(unwind_stop_name(own.stop), std::string("complete")) << "at 0x" << std::hex << own.stop_address;
    EXPECT_FALSE(own.frame_pointer_fallback);
    EXPECT_EQ(own.return_addresses, backtrace_callers(capture));
    EXPECT_TRUE(ends_in_start(own.return_addresses));

    DwflUnwinder dwfl(map.mappings());
    EXPECT_EQ(dwfl.error(), "");
    UnwoundStack theirs = dwfl.unwind(d);
    EXPECT_EQ(unwind_stop_name(theirs.stop), std::string("complete"));
    EXPECT_EQ(theirs.return_addresses, own.return_addresses);
    return own;
  }
};

TEST_F(CapturedStacks, AlternatingFramePointerAndRspFramesMatchBacktrace) {
  fx_walk_fp(5, &capture, stack_end());
  SelfCodeMap map;
  UnwoundStack own = unwind_and_compare(map);
  ASSERT_GE(own.return_addresses.size(), 6u);
  EXPECT_EQ(symbol_at(own.return_addresses[0] - 1), "fx_walk_nofp");
  EXPECT_EQ(symbol_at(own.return_addresses[1] - 1), "fx_walk_fp");
}

TEST_F(CapturedStacks, DeepRecursionWithoutFramePointersMatchesBacktrace) {
  constexpr int kDepth = 150;
  fx_recurse_nofp(kDepth, &capture, stack_end());
  ASSERT_FALSE(definition_of(capture).truncated) << "the copy must hold the whole stack";
  SelfCodeMap map;
  UnwoundStack own = unwind_and_compare(map);
  ASSERT_GT(own.return_addresses.size(), static_cast<size_t>(kDepth));
  for (int i = 0; i <= kDepth; ++i) {
    EXPECT_EQ(symbol_at(own.return_addresses[i] - 1), "fx_recurse_nofp") << i;
  }
}

// Through glibc's __restore_rt: the caller of the trampoline is the
// interrupted instruction, read from the ucontext the kernel pushed.
TEST_F(CapturedStacks, SignalHandlerStackUnwindsThroughTheSignalFrame) {
  struct sigaction installed {};
  ASSERT_GT(fx_capture_in_signal_handler(&capture, stack_end()), 0);
  // The restorer glibc installs for every handler.
  struct sigaction probe {};
  probe.sa_handler = [](int) {};
  struct sigaction previous {};
  ASSERT_EQ(sigaction(SIGUSR2, &probe, &previous), 0);
  ASSERT_EQ(sigaction(SIGUSR2, nullptr, &installed), 0);
  ASSERT_EQ(sigaction(SIGUSR2, &previous, nullptr), 0);
  const uint64_t restorer = reinterpret_cast<uint64_t>(installed.sa_restorer);

  SelfCodeMap map;
  UnwoundStack own = unwind_and_compare(map);
  auto trampoline = std::find(own.return_addresses.begin(), own.return_addresses.end(), restorer);
  ASSERT_NE(trampoline, own.return_addresses.end()) << "no frame returns to __restore_rt";
  // After it: the interrupted pc in libc's raise path, then fx_capture_in_signal_handler.
  const size_t after = static_cast<size_t>(trampoline - own.return_addresses.begin()) + 1;
  ASSERT_LT(after + 1, own.return_addresses.size());
  // Both the trampoline (returned to at its first byte) and the interrupted
  // instruction are exact pcs, and nothing else is.
  EXPECT_EQ(own.exact_pcs, (std::vector<uint32_t>{static_cast<uint32_t>(after - 1), static_cast<uint32_t>(after)}));
  bool reached_raiser = false;
  for (size_t i = after; i < own.return_addresses.size(); ++i)
    reached_raiser = reached_raiser || symbol_at(own.return_addresses[i] - 1) == "fx_capture_in_signal_handler";
  EXPECT_TRUE(reached_raiser);
}

// A copy cut anywhere: the chain found is a prefix of the full one, and the
// stop says the copy ended.
TEST_F(CapturedStacks, TruncatedCopyGivesAPrefix) {
  fx_recurse_nofp(40, &capture, stack_end());
  SelfCodeMap map;
  DwflUnwinder dwfl(map.mappings());
  ASSERT_EQ(dwfl.error(), "");
  const StackDefinition full = definition_of(capture);
  const UnwoundStack whole = unwind_copy(StackUnwinder(), full, map);
  ASSERT_EQ(whole.stop, UnwindStop::Complete);
  size_t previous = 0, truncations = 0;
  for (size_t cut = 0; cut < full.bytes.size(); cut += 232) {
    SCOPED_TRACE("copy of " + std::to_string(cut) + " bytes");
    StackDefinition d = full;
    d.bytes.resize(cut);
    d.truncated = true;
    UnwoundStack own = unwind_copy(StackUnwinder(), d, map);
    // libdwfl takes the unreadable return address for the end of the stack;
    // DwflUnwinder tells the two apart by the failed read.
    UnwoundStack theirs = dwfl.unwind(d);
    EXPECT_EQ(theirs.return_addresses, own.return_addresses);
    EXPECT_EQ(theirs.stop, own.stop);
    if (own.stop == UnwindStop::Complete) {  // the copy holds _start's frame: the bytes above do not matter
      EXPECT_EQ(own.return_addresses, whole.return_addresses);
      break;
    }
    ++truncations;
    EXPECT_EQ(unwind_stop_name(own.stop), std::string("truncated-copy"));
    EXPECT_TRUE(is_prefix(own.return_addresses, whole.return_addresses));
    EXPECT_LT(own.return_addresses.size(), whole.return_addresses.size());
    EXPECT_GE(own.return_addresses.size(), previous) << "a longer copy never gives fewer frames";
    previous = own.return_addresses.size();
  }
  EXPECT_GT(previous, 30u) << "the cuts covered most of the recursion";
  EXPECT_GT(truncations, 10u);
}

TEST_F(CapturedStacks, FrameLimitStopsWithAPrefix) {
  fx_walk_fp(5, &capture, stack_end());
  SelfCodeMap map;
  const StackDefinition d = definition_of(capture);
  const UnwoundStack whole = unwind_copy(StackUnwinder(), d, map);
  const UnwoundStack limited = unwind_copy(StackUnwinder(3), d, map);
  EXPECT_EQ(limited.stop, UnwindStop::FrameLimit);
  EXPECT_EQ(limited.return_addresses.size(), 3u);
  EXPECT_TRUE(is_prefix(limited.return_addresses, whole.return_addresses));
  DwflUnwinder dwfl(map.mappings(), 3);
  const UnwoundStack theirs = dwfl.unwind(d);
  EXPECT_EQ(theirs.stop, UnwindStop::FrameLimit);
  EXPECT_EQ(theirs.return_addresses, limited.return_addresses);
}

// A file without CFI called with a frame pointer: the rbp chain leads past it.
__attribute__((noinline)) void capture_through_nocfi(std::vector<uint64_t>* callers) {
  void* bt[256];
  const int n = backtrace(bt, 256);
  fx_nocfi_call(fx_capture_stack, &capture, stack_end());
  for (int i = 1; i < n; ++i) callers->push_back(reinterpret_cast<uint64_t>(bt[i]));
}

TEST_F(CapturedStacks, CodeWithoutCfiFallsBackToTheFramePointerChain) {
  std::vector<uint64_t> callers;  // the callers of capture_through_nocfi
  capture_through_nocfi(&callers);
  ASSERT_FALSE(callers.empty());
  SelfCodeMap map;
  const StackDefinition d = definition_of(capture);
  UnwoundStack own = unwind_copy(StackUnwinder(), d, map);
  EXPECT_EQ(unwind_stop_name(own.stop), std::string("complete"));
  EXPECT_TRUE(own.frame_pointer_fallback);
  ASSERT_EQ(own.return_addresses.size(), callers.size() + 2);
  EXPECT_EQ(symbol_at(own.return_addresses[0] - 1), "fx_nocfi_call");
  const uint64_t helper = reinterpret_cast<uint64_t>(&capture_through_nocfi);
  EXPECT_TRUE(own.return_addresses[1] > helper && own.return_addresses[1] - helper < 4096)
      << "[1] returns into capture_through_nocfi";
  EXPECT_TRUE(std::equal(callers.begin(), callers.end(), own.return_addresses.begin() + 2));

  // libdwfl's x86-64 backend falls back to the same chain.
  DwflUnwinder dwfl(map.mappings());
  EXPECT_EQ(dwfl.unwind(d).return_addresses, own.return_addresses);

  // Without a usable rbp there is nothing to fall back to.
  StackDefinition no_rbp = d;
  no_rbp.regs[6] = 0;
  UnwoundStack stopped = unwind_copy(StackUnwinder(), no_rbp, map);
  EXPECT_EQ(stopped.stop, UnwindStop::NoCfi);
  EXPECT_FALSE(stopped.frame_pointer_fallback);
  ASSERT_EQ(stopped.return_addresses.size(), 1u);
  EXPECT_EQ(stopped.stop_address, own.return_addresses[0]);
}

// A mapped file whose CFI is unavailable (the vDSO's case): the frame-pointer
// frames of fx_walk_fp carry the unwind past the rsp-based ones, skipping
// some; the CFI of the test's own code takes over again.
// A mapped file whose CFI is not available (missing offline, the vDSO): the
// unwind stops there rather than trust rbp.
TEST_F(CapturedStacks, MappedCodeWithoutModuleStops) {
  fx_walk_fp(5, &capture, stack_end());
  const UnwoundStack whole = unwind_copy(StackUnwinder(), definition_of(capture), SelfCodeMap());
  ASSERT_GT(whole.return_addresses.size(), 2u);
  // libc without its CFI: the walk stops at the first frame in libc.
  SelfCodeMap map("", "/libc.so.6");
  UnwoundStack own = unwind_copy(StackUnwinder(), definition_of(capture), map);
  EXPECT_EQ(own.stop, UnwindStop::NoCfi);
  EXPECT_FALSE(own.frame_pointer_fallback);
  ASSERT_LT(own.return_addresses.size(), whole.return_addresses.size());
  EXPECT_TRUE(std::equal(own.return_addresses.begin(), own.return_addresses.end(), whole.return_addresses.begin()))
      << "a prefix of the full chain";
  EXPECT_EQ(own.stop_address, own.return_addresses.back()) << "it stops at the return address into libc";
}

// At the allocator's entry rbp is still its caller's: following the rbp
// chain from there would skip that caller. Without CFI for the entry, the
// return address is the word at rsp (the probe sits where rsp is as at the
// call); the caller, in a file without CFI here too, ends the walk.
TEST(StackUnwinder, AnAllocatorEntryWithoutCfiUsesTheWordAtRsp) {
  struct OneRange : CodeMap {
    CodeRange range{0x1000, 0x2000, 0, nullptr};
    const CodeRange* find(uint64_t address) const override {
      return address >= range.start && address < range.end ? &range : nullptr;
    }
  } map;
  StackDefinition definition;
  definition.sp = 0x7000;
  definition.regs.assign(17, 0);
  definition.regs[7] = 0x7000;
  definition.regs[6] = 0x7020;   // the caller's frame
  definition.regs[16] = 0x1100;  // the allocator's entry, no CFI
  definition.bytes.assign(0x40, 0);
  auto put = [&](uint64_t at, uint64_t value) { std::memcpy(definition.bytes.data() + (at - 0x7000), &value, 8); };
  put(0x7000, 0x1222);  // the return address into the caller
  put(0x7020, 0);       // the caller's saved rbp
  put(0x7028, 0x1333);  // the caller's caller
  UnwoundStack unwound = unwind_copy(StackUnwinder(), definition, map);
  EXPECT_EQ(unwound.stop, UnwindStop::NoCfi);
  EXPECT_EQ(unwound.stop_address, 0x1222u);
  EXPECT_EQ(unwound.return_addresses, std::vector<uint64_t>{0x1222}) << "0x1333 alone would skip the caller";
  EXPECT_FALSE(unwound.frame_pointer_fallback);
}

TEST_F(CapturedStacks, AddressOutsideEveryMappingIsNoModule) {
  fx_walk_fp(5, &capture, stack_end());
  const StackDefinition d = definition_of(capture);
  const UnwoundStack whole = unwind_copy(StackUnwinder(), d, SelfCodeMap());
  SelfCodeMap without_libc("/libc.so.6");
  UnwoundStack own = unwind_copy(StackUnwinder(), d, without_libc);
  EXPECT_EQ(own.stop, UnwindStop::NoModule);
  ASSERT_FALSE(own.return_addresses.empty());
  EXPECT_TRUE(is_prefix(own.return_addresses, whole.return_addresses));
  EXPECT_EQ(own.stop_address, own.return_addresses.back());
  auto where = SelfMaps().file_offset(own.stop_address - 1);
  ASSERT_TRUE(where);
  EXPECT_TRUE(where->path.ends_with("/libc.so.6")) << where->path;

  StackDefinition nowhere = d;
  nowhere.regs[16] = 0x10;  // below every mapping
  own = unwind_copy(StackUnwinder(), nowhere, SelfCodeMap());
  EXPECT_EQ(own.stop, UnwindStop::NoModule);
  EXPECT_EQ(own.stop_address, 0x10u);
  EXPECT_TRUE(own.return_addresses.empty());
}

// Ends that are not crashes: every stop reason is one of the enum, the chain
// is bounded, and the obviously broken inputs say what they are.
TEST_F(CapturedStacks, GarbageNeverCrashesOrLoops) {
  fx_walk_fp(5, &capture, stack_end());
  SelfCodeMap map;
  DwflUnwinder dwfl(map.mappings(), 64);
  const StackDefinition good = definition_of(capture);
  const StackUnwinder unwinder(64);

  StackDefinition empty = good;
  empty.bytes.clear();
  UnwoundStack r = unwind_copy(unwinder, empty, map);
  EXPECT_EQ(r.stop, UnwindStop::TruncatedCopy) << "the first return address is just past the (empty) copy";
  EXPECT_TRUE(r.return_addresses.empty());

  StackDefinition few_registers = good;
  few_registers.regs.resize(8);
  EXPECT_EQ(unwind_copy(unwinder, few_registers, map).stop, UnwindStop::BadCfa);
  EXPECT_EQ(dwfl.unwind(few_registers).stop, UnwindStop::BadCfa);

  StackDefinition far_below = good;
  far_below.regs[7] = good.sp - 4096;  // rsp below the copy
  EXPECT_EQ(unwind_copy(unwinder, far_below, map).stop, UnwindStop::BadCfa);

  StackDefinition far_above = good;
  far_above.sp -= 1 << 20;  // the copy ends 1 MiB below where the frames are
  far_above.truncated = false;
  EXPECT_EQ(unwind_copy(unwinder, far_above, map).stop, UnwindStop::BadCfa);

  std::mt19937_64 random(20261129);
  for (int round = 0; round < 2000; ++round) {
    StackDefinition d = good;
    switch (round % 4) {
      case 0:  // random bytes under the real registers
        for (auto& b : d.bytes) b = static_cast<uint8_t>(random());
        break;
      case 1:  // random registers over the real bytes
        for (auto& reg : d.regs) reg = random();
        break;
      case 2:  // a misaligned sp and copy
        d.sp += 1 + round % 7;
        d.regs[7] = d.sp;
        d.bytes.erase(d.bytes.begin(), d.bytes.begin() + 1 + round % 7);
        break;
      case 3:  // return-address-like words everywhere: real code addresses, real stack addresses
        for (size_t i = 0; i + 8 <= d.bytes.size(); i += 8) {
          const uint64_t word = random() % 2 ? good.sp + random() % good.bytes.size()
                                             : good.regs[16] + random() % 4096 - 2048;
          std::memcpy(d.bytes.data() + i, &word, 8);
        }
        break;
    }
    SCOPED_TRACE("round " + std::to_string(round));
    r = unwind_copy(unwinder, d, map);
    ASSERT_LE(r.return_addresses.size(), 64u);
    EXPECT_EQ(r.stop == UnwindStop::FrameLimit, r.return_addresses.size() == 64u);
    EXPECT_NE(std::string(unwind_stop_name(r.stop)), "unknown");
    if (round % 8 == 0) {
      ASSERT_LE(dwfl.unwind(d).return_addresses.size(), 64u);
    }
  }
}

// binutils' lazy .plt entries have a CFA expression (rsp + 8, + 16 from the
// entry's jmp to PLT0 on); a synthetic stack stopped in fx_cfi_frame's call
// through the PLT, at three instructions of the entry.
TEST_F(CapturedStacks, LazyPltEntryIsUnwound) {
  int32_t rel32;
  std::memcpy(&rel32, reinterpret_cast<const uint8_t*>(fx_cfi_frame) + 9, sizeof rel32);
  const uint64_t frame = reinterpret_cast<uint64_t>(fx_cfi_frame);
  const uint64_t plt_entry = frame + 13 + static_cast<int64_t>(rel32);
  ASSERT_NE(plt_entry, reinterpret_cast<uint64_t>(fx_cfi_leaf)) << "the call was bound directly, not through the PLT";
  SelfCodeMap map;
  DwflUnwinder dwfl(map.mappings());
  // fx_cfi_frame at +13: CFA = rbp + 16, rbp saved at CFA - 16. Its caller's
  // return address is 0: the end.
  for (const auto& [at, pushed] : {std::pair{0, 0}, {6, 0}, {11, 8}}) {
    SCOPED_TRACE("plt entry +" + std::to_string(at));
    StackDefinition d;
    d.sp = 0x7ff000000000;
    d.regs.assign(17, 0);
    d.regs[16] = plt_entry + at;
    d.regs[7] = d.sp;
    const uint64_t frame_rsp = d.sp + pushed + 8;  // after the return address
    d.regs[6] = frame_rsp + 32;                    // fx_cfi_frame's rbp: after push rbp; mov; sub $32
    std::vector<uint64_t> words(pushed / 8, 7);    // the relocation index
    words.push_back(frame + 13);
    words.resize(words.size() + 4, 0xdead);  // fx_cfi_frame's locals
    words.push_back(0);                      // its saved rbp
    words.push_back(0);                      // its return address
    d.bytes.resize(words.size() * 8);
    std::memcpy(d.bytes.data(), words.data(), d.bytes.size());
    UnwoundStack own = unwind_copy(StackUnwinder(), d, map);
    EXPECT_EQ(unwind_stop_name(own.stop), std::string("complete"));
    EXPECT_EQ(own.return_addresses, std::vector<uint64_t>{frame + 13});
    EXPECT_EQ(dwfl.unwind(d).return_addresses, own.return_addresses);
  }
}

// Module records instead of files: the same steps, the same unwinds.
TEST_F(CapturedStacks, ModulesFromModuleRecordsUnwindTheSame) {
  fx_capture_in_signal_handler(&capture, stack_end());
  SelfCodeMap files;
  SelfCodeMap records;
  records.use_module_records();
  const StackDefinition d = definition_of(capture);
  const UnwoundStack from_files = unwind_copy(StackUnwinder(), d, files);
  const UnwoundStack from_records = unwind_copy(StackUnwinder(), d, records);
  EXPECT_EQ(from_files.stop, UnwindStop::Complete);
  EXPECT_EQ(from_records.stop, from_files.stop);
  EXPECT_EQ(from_records.return_addresses, from_files.return_addresses);
  EXPECT_EQ(from_records.return_addresses, backtrace_callers(capture));

  // .debug_frame alone serves a record without .eh_frame.
  auto where = SelfMaps().file_offset(reinterpret_cast<uint64_t>(&fx_cfi_debug_frame_only));
  ASSERT_TRUE(where);
  ModuleInfo info = SelfCodeMap::module_info(where->path);
  ASSERT_TRUE(info.debug_frame) << "libfx_unwind.so is built with -g";
  info.eh_frame.reset();
  info.eh_frame_hdr.reset();
  auto module = UnwindModule::from_module_info(info);
  EXPECT_EQ(module->step_at(where->offset + 1).kind, UnwindStep::Kind::Rule);
  EXPECT_EQ(module->step_at(where->offset + 1).rule.cfa_offset, 16);
  auto leaf = SelfMaps().file_offset(reinterpret_cast<uint64_t>(&fx_cfi_leaf));
  EXPECT_EQ(module->step_at(leaf->offset).kind, UnwindStep::Kind::NoCfi) << "its CFI was in .eh_frame";
}

TEST(UnwindModule, RefusesAMissingFileNamingIt) {
  try {
    UnwindModule module("/nonexistent/libnothing.so");
    ADD_FAILURE() << "accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "/nonexistent/libnothing.so: cannot open: No such file or directory");
  }
}

TEST(UnwindModule, SignalTrampolineIsASignalFrame) {
  struct sigaction probe {}, installed {}, previous {};
  probe.sa_handler = [](int) {};
  ASSERT_EQ(sigaction(SIGUSR2, &probe, &previous), 0);
  ASSERT_EQ(sigaction(SIGUSR2, nullptr, &installed), 0);
  ASSERT_EQ(sigaction(SIGUSR2, &previous, nullptr), 0);
  auto where = SelfMaps().file_offset(reinterpret_cast<uint64_t>(installed.sa_restorer));
  ASSERT_TRUE(where);
  UnwindModule libc(where->path);
  EXPECT_EQ(libc.step_at(where->offset).kind, UnwindStep::Kind::SignalFrame);
  EXPECT_EQ(libc.step_at(where->offset - 1).kind, UnwindStep::Kind::SignalFrame) << "the FDE starts a byte early";
  // The caller's cache looks a step up once: the second lookup is the same object.
  UnwindCache cache;
  const UnwindStep& first = cache.step_at(libc, where->offset);
  EXPECT_EQ(&cache.step_at(libc, where->offset), &first);
  EXPECT_EQ(first.kind, UnwindStep::Kind::SignalFrame);
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
}  // namespace memtrack
