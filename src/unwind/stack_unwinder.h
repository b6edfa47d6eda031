// Offline unwinding of recorded raw stack copies into a chain of return
// addresses, with the modules' DWARF CFI turned into the compact rules of
// cfi_rules.h.
//
// What the unwinder sees, and who owns what (the shape of framehop's
// unwind_frame(address, regs, cache, read_stack)):
// - registers: the 17 DWARF registers at the allocator's entry (16 = rip);
// - CodeMap: which file is mapped at an address (the caller's placements);
// - StackMemory: the only memory it reads (StackCopy: a recorded copy);
// - UnwindCache: the steps already looked up, owned by the caller.
// The unwinder itself holds no state. UnwindModules are immutable once
// built; what changes during an unwind is the cache, passed by non-const
// reference, so the thread-safety rule is in the signatures: one cache per
// thread (or a lock around it). libdw caches on its own behind an
// UnwindModule, so step lookups of one module must not run concurrently
// either: threads unwinding at once each need their own modules too.
// A cache refers to the modules it saw: it must not outlive them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "format/module_info.h"
#include "unwind/cfi_rules.h"

namespace memtrack {

// How to get from a frame to its caller, for one instruction.
struct UnwindStep {
  enum class Kind : uint8_t {
    NoCfi,        // no CFI describes the instruction
    Rule,         // `rule` (cfi_rules.h; a lazy .plt entry already evaluated)
    Outermost,    // no caller (_start, a thread's start routine)
    SignalFrame,  // the sigreturn trampoline: the caller's state is in a ucontext at rsp
    Unsupported,  // CFI this unwinder cannot follow (other DWARF expressions)
  };
  Kind kind = Kind::NoCfi;
  mt_unwind_rule rule{};
};

// One ELF file's CFI for offline unwinding. Immutable once built.
class UnwindModule {
 public:
  // Throws std::runtime_error naming `path` (see ModuleCfi).
  explicit UnwindModule(const std::string& path);
  // From an embedded Module record when the file itself is gone: an ELF image
  // is built in memory with its load segments' program headers and its
  // .eh_frame_hdr/.eh_frame/.debug_frame sections. Throws std::runtime_error
  // naming info.path when libelf refuses it.
  static std::unique_ptr<UnwindModule> from_module_info(const ModuleInfo& info);

  // The step at the instruction at `file_offset` (for a return address, pass
  // the call's offset: return address - 1). A CFI lookup: UnwindCache keeps
  // the result.
  UnwindStep step_at(uint64_t file_offset) const;

 private:
  explicit UnwindModule(std::unique_ptr<ModuleCfi> cfi);

  std::unique_ptr<ModuleCfi> cfi_;
};

// Steps by (module, file offset): many stacks through the same code cost one
// hash lookup per frame. Owned by the unwinder's caller, one per thread.
class UnwindCache {
 public:
  const UnwindStep& step_at(const UnwindModule& module, uint64_t file_offset);
  size_t size() const { return steps_.size(); }

 private:
  using Key = std::pair<const UnwindModule*, uint64_t>;
  struct KeyHash {
    size_t operator()(const Key& key) const {
      return std::hash<uint64_t>()(key.second * 0x9e3779b97f4a7c15ull ^ reinterpret_cast<uintptr_t>(key.first));
    }
  };
  std::unordered_map<Key, UnwindStep, KeyHash> steps_;
};

// One executable mapping of the process, at the moment the stack was captured.
struct CodeRange {
  uint64_t start = 0, end = 0;           // [start, end)
  uint64_t file_offset = 0;              // file offset of `start`
  const UnwindModule* module = nullptr;  // null: mapped, but no CFI is available for its file (the vDSO, ...)
};

// What the unwinder needs of the process's address space; implemented by the
// caller (from recorded placements).
class CodeMap {
 public:
  virtual ~CodeMap() = default;
  virtual const CodeRange* find(uint64_t address) const = 0;  // nullptr: no mapping covers it
};

// How many return addresses a path keeps: the recorders' walks stop there
// too (MT_MAX_FRAMES), so a path ends frame-limit at the same depth whether
// walked when recorded or unwound from a raw copy.
inline constexpr size_t kMaxStackFrames = 256;

// Why an unwind ended.
// The registers of a raw definition: DWARF numbers 0..16 (16 = rip).
inline constexpr size_t kUnwindRegisters = 17;
// A word this far past the end of an untruncated copy still counts as a
// frame the copy cut (a copy that stopped at a missing page); further, the
// registers or the CFI pointed somewhere wrong. Shared by both unwinders so
// that they give the same stop.
inline constexpr uint64_t kTruncationSlack = 4096;

enum class UnwindStop : uint8_t {
  Complete,       // a frame without caller (CFI says the return address is undefined), or a return address 0
  TruncatedCopy,  // the next frame's words lie past the end of the copy (the copy was cut at its budget,
                  // or they are within 4 KiB of its end)
  NoCfi,          // no CFI for the frame, nor a frame-pointer chain inside the copy to fall back to (never
                  // for an activation frame); a range whose module is null (its CFI is not available); or
                  // CFI this unwinder cannot follow (a DWARF expression other than a lazy .plt entry's)
  BadCfa,         // inconsistent: a CFA not above the frame's rsp, a word below sp or far past the copy, or
                  // fewer than 17 registers
  NoModule,       // the address is outside every mapping
  FrameLimit,     // max_frames return addresses were found
};
const char* unwind_stop_name(UnwindStop stop);  // "complete", "truncated-copy", "no-cfi", ...

struct UnwoundStack {
  // Innermost first, the activation frame (regs[16]) excluded: [0] is the
  // allocator's caller, as in StackDefinition::chain. Each entry is a return
  // address, except the one after a signal frame's trampoline: the
  // interrupted instruction itself (its caller is looked up at that address,
  // not at address - 1).
  std::vector<uint64_t> return_addresses;
  UnwindStop stop = UnwindStop::Complete;
  uint64_t stop_address = 0;            // the pc of the frame it could not unwind (all stops but Complete and FrameLimit)
  bool frame_pointer_fallback = false;  // some frames came from the rbp chain
  // Indexes in return_addresses of exact pcs, to be symbolized at the
  // address rather than address - 1: a signal trampoline's address (the
  // handler "returns" to its first instruction) and the instruction the
  // signal interrupted.
  std::vector<uint32_t> exact_pcs;
};

// The stack memory an unwind may read, in 8-byte words.
class StackMemory {
 public:
  virtual ~StackMemory() = default;
  virtual bool read(uint64_t address, uint64_t* word) const = 0;
  // Why the word at `address` could not be read: TruncatedCopy or BadCfa.
  virtual UnwindStop why_unreadable(uint64_t address) const = 0;
};

// A recorded copy of the stack [sp, sp + bytes.size()); `truncated`: the
// copy was cut at its budget (a word past its end is a frame it cut). Refers
// to the bytes, does not copy them.
class StackCopy final : public StackMemory {
 public:
  StackCopy(uint64_t sp, std::span<const uint8_t> bytes, bool truncated)
      : sp_(sp), bytes_(bytes), truncated_(truncated) {}
  bool read(uint64_t address, uint64_t* word) const override;
  UnwindStop why_unreadable(uint64_t address) const override;

 private:
  uint64_t sp_;
  std::span<const uint8_t> bytes_;
  bool truncated_;
};

class StackUnwinder {
 public:
  explicit StackUnwinder(size_t max_frames = kMaxStackFrames);
  // `registers`: DWARF 0..16 at the allocator's entry (fewer: BadCfa).
  UnwoundStack unwind(std::span<const uint64_t> registers, const CodeMap& code, UnwindCache& cache,
                      const StackMemory& stack) const;

 private:
  size_t max_frames_;
};

}  // namespace memtrack
