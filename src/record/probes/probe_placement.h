// Where in an allocator function a uprobe costs least.
//
// The x86-64 uprobe code of Linux 6.18 (arch/x86/kernel/uprobes.c,
// arch_uprobe_analyze_insn) either emulates the probed instruction inside the
// breakpoint trap, or copies it to the XOL page and single-steps it there,
// which costs a second trap. It emulates exactly:
//   branch_setup_xol_ops, unless a 0x66 prefix is present (then -ENOTSUPP:
//   the probe is refused):
//     - eb / e9             jmp rel8 / rel32
//     - e8                  call rel32
//     - 70..7f / 0f 80..8f  jcc rel8 / rel32
//     - x86_nops[len], len 1..ASM_NOP_MAX (8), the canonical NOPs of
//       asm/nops.h (90, 66 90, 0f 1f 00, 0f 1f 40 00, 0f 1f 44 00 00,
//       66 0f 1f 44 00 00, 0f 1f 80 0*4, 0f 1f 84 00 0*4), by memcmp (lore:
//       20250414083647.1234007-1-jolsa@kernel.org), and prefixes + 90
//   push_setup_xol_ops:
//     - 50..57              push %rax..%rdi (one byte)
//     - 41 50..57           push %r8..%r15 (REX exactly 0x41, two bytes)
// Everything else is single-stepped; an instruction with a 26/2e/36/3e/f0
// prefix (is_prefix_bad) cannot be probed at all. Measured on this machine's
// 6.18 kernel with one perf uprobe per instruction and 200k calls: push, jcc,
// jmp, call and the canonical NOPs cost 0.6 us a hit (the 5-byte NOP 0.46 us:
// 6.18 can turn it into a call to a uprobe trampoline); test, mov, endbr64,
// 48 53 (push with REX.W), a non-canonical nopl (0f 1f 04 00) and a 9-byte
// nopw cost 10 us; "cs nopw" and "ds je" were refused. Other "prefixes + 90"
// forms than 66 90 are not counted as emulated: with REX.B, 41 90 is
// xchg %eax,%r8d, not a NOP.
//
// So when the entry instruction is single-stepped we look a few instructions
// further for an emulated one that every call reaches with the argument
// registers the probe reads, %rsp (whose slot holds the return address a
// uretprobe hijacks, and which the BPF side keeps to spot nested calls) and
// %rbp (frame-pointer unwinding) exactly as at entry. A uretprobe placed
// there works as at the entry: the kernel hijacks the return address at
// [%rsp] when the probe hits.
#pragma once

#include <capstone/capstone.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace memtrack {

// Bit i set: the probe reads argument register i (%rdi, %rsi, %rdx, %rcx,
// %r8, %r9 in that order), so no skipped instruction may write it.
using ArgumentMask = uint8_t;
inline constexpr ArgumentMask kAllArguments = 0x3f;

// One decoded instruction, judged for probe placement.
struct DecodedInsn {
  std::size_t length = 0;
  std::string mnemonic;
  // What the kernel emulates it as ("push", "jcc", "jmp", "call", "nop",
  // "nop5"); empty when it would be single-stepped.
  std::string_view emulated;
  // Executing it changes nothing a probe placed after it reads: no control
  // flow, no write to a read argument register, %rsp, %rbp or memory, no
  // unusual prefix.
  bool transparent = false;
  // Target of a direct jump or call, relative to the decode address 0 of the
  // function entry.
  std::optional<int64_t> branch_target;
};

// Capstone x86-64 handle in detail mode; one per thread.
class InstructionDecoder {
 public:
  InstructionDecoder();
  ~InstructionDecoder();
  InstructionDecoder(const InstructionDecoder&) = delete;
  InstructionDecoder& operator=(const InstructionDecoder&) = delete;

  // Decodes the instruction at `code[offset]`; nullopt when the bytes are not
  // a valid instruction (or run out).
  std::optional<DecodedInsn> decode(std::span<const uint8_t> code, std::size_t offset,
                                    ArgumentMask read_arguments = kAllArguments);

 private:
  csh handle_ = 0;
  cs_insn* insn_ = nullptr;
};

struct ProbePlacement {
  uint64_t offset = 0;  // from the function entry
  std::string reason;   // e.g. "+3: jcc after test (emulated)"
};

// Whether `code` holds the whole function body. Moving the probe past the
// entry needs it: a branch from inside the function back into the skipped
// instructions would fire the moved probe a second time.
enum class FunctionExtent { whole, unknown_end };

// Chooses the probe offset in the function whose bytes start at `code[0]`:
// the entry when the kernel emulates its instruction; else the first emulated
// instruction after at most 4 transparent ones and within 32 bytes, provided
// no direct branch in the body lands between the entry and it; else the
// entry. The fallback stays at the entry even after an endbr64: the next
// instruction would be single-stepped as well, so moving gains nothing.
ProbePlacement choose_probe_offset(InstructionDecoder& decoder, std::span<const uint8_t> code,
                              FunctionExtent extent = FunctionExtent::whole,
                              ArgumentMask read_arguments = kAllArguments);

}  // namespace memtrack
