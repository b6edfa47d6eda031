// Compact x86-64 unwind rules (wire/unwind_rule.h) for the in-kernel stack
// walker, derived from one ELF file's DWARF CFI with libdw.
//
// Offsets are FILE offsets, the key the walker uses (the same file mapped at
// any address, in any process, shares its rules): a code address A in a
// mapping [start, end) with file offset O is at file offset A - start + O.
// Internally they are converted to the file's own link-time addresses
// through its executable PT_LOAD segments, which is what the CFI describes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wire/unwind_rule.h"

namespace memtrack {

// One per ELF file: opens it once. Lookups are thread-safe (libdw fills its
// CFI caches lazily, so they are serialized internally).
//
// A rule, once the walker has the current frame's rsp, rbp and PC:
//   CFA = (cfa_reg == MT_CFA_RBP ? rbp : rsp) + cfa_offset
//   caller's PC  = [CFA - 8]   (checked: the RA rule is offset(-8))
//   caller's rsp = CFA          (checked: the rsp rule is the ABI's val_offset(0))
//   caller's rbp = flags & MT_RULE_RBP_SAVED ? [CFA + rbp_offset] : rbp
// With MT_RULE_OUTERMOST (the caller's PC is undefined: no caller) or
// MT_RULE_UNSUPPORTED (a DWARF expression, a register other than rsp/rbp, a
// signal frame, an offset beyond 32 bits) every other field is zero. A
// signal frame (the sigreturn trampoline's FDE) is MT_RULE_UNSUPPORTED |
// MT_RULE_SIGNAL_FRAME: the kernel's walker stops at UNSUPPORTED, the offline
// unwinder (stack_unwinder.h) reads the interrupted registers instead.
// Lazy-binding .plt entries are UNSUPPORTED: binutils describes them with a
// CFA expression (offline_rule_at_pc evaluates it).
//
// std::nullopt: no CFI describes that instruction (.eh_frame, then the
// file's own .debug_frame, are consulted), or the offset is not in an
// executable PT_LOAD segment of the file.
class ModuleCfi {
 public:
  // Throws std::runtime_error naming `path` when it cannot be opened, is not
  // an x86-64 ELF file, or its program headers cannot be read. A file
  // without CFI is valid: every lookup then returns std::nullopt.
  explicit ModuleCfi(const std::string& path);
  // The same from an ELF image in memory (section and program headers must
  // lie in it; segment contents need not). `name` is for error messages.
  ModuleCfi(const std::string& name, std::vector<char> image);
  ~ModuleCfi();
  ModuleCfi(const ModuleCfi&) = delete;
  ModuleCfi& operator=(const ModuleCfi&) = delete;

  // The rule of a caller frame, given the file offset of the RETURN ADDRESS
  // itself (what the walker reads from the stack and keys its map with). It
  // is evaluated at return address - 1, inside the call instruction: the
  // return address may already belong to the next function (after a
  // noreturn call) or to a different CFI row (after `call; leave`).
  std::optional<mt_unwind_rule> rule_at_return_address(uint64_t return_address_file_offset) const;

  // rule_at_return_address of each offset, in order. The CFI is evaluated
  // once per row of its table rather than once per offset: ascending offsets
  // in one row (the calls of a function body, between two changes of its
  // stack) share the evaluation (libdw runs the FDE's program from the
  // function's start at every lookup).
  std::vector<std::optional<mt_unwind_rule>> rules_at_return_addresses(const std::vector<uint64_t>& offsets) const;

  // The rule of the innermost frame, given the file offset of the
  // instruction about to execute (evaluated at that instruction).
  std::optional<mt_unwind_rule> rule_at_pc(uint64_t pc_file_offset) const;

  // rule_at_pc for the offline unwinder: a lazy-binding .plt entry's CFA
  // expression (binutils': rsp + 8, + 16 once the entry pushed its index) is
  // evaluated for that instruction into an rsp-based rule.
  std::optional<mt_unwind_rule> offline_rule_at_pc(uint64_t pc_file_offset) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace memtrack
