#include "unwind/cfi_rules.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "module/elf_file.h"
#include "unwind/dwarf_registers.h"

namespace memtrack {
namespace {

static_assert(sizeof(mt_unwind_rule) == 12, "the BPF map value layout");

mt_unwind_rule flagged(uint8_t flag) {
  mt_unwind_rule rule{};
  rule.flags = flag;
  return rule;
}

std::optional<int32_t> to_s32(int64_t value) {
  if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max())
    return std::nullopt;
  return static_cast<int32_t>(value);
}

// k when the register rule is offset(k): saved at CFA + k. libdw 0.188 spells
// it DW_OP_call_frame_cfa [, DW_OP_plus_uconst (uint64_t)k] (k may be < 0).
std::optional<int64_t> saved_at_cfa_offset(const Dwarf_Op* ops, size_t nops) {
  if (nops == 0 || ops[0].atom != DW_OP_call_frame_cfa) return std::nullopt;
  if (nops == 1) return 0;
  if (nops == 2 && ops[1].atom == DW_OP_plus_uconst) return static_cast<int64_t>(ops[1].number);
  return std::nullopt;
}

// The CFA offset from rsp of a lazy-binding .plt entry at link address
// `address`, when `ops` is binutils' CFA expression for those entries:
// rsp + 8, plus 8 once the entry has pushed its relocation index, i.e. from
// the entry's byte N on: DW_OP_breg7 8; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and;
// DW_OP_litN; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus. Entries are 16-byte
// aligned and the load bias is page-aligned, so rip & 15 is address & 15.
std::optional<int64_t> lazy_plt_cfa_offset(const Dwarf_Op* ops, size_t nops, uint64_t address) {
  if (nops != 9) return std::nullopt;
  const bool pattern = ops[0].atom == DW_OP_breg0 + kDwarfRsp && ops[0].number == 8 &&
                       ops[1].atom == DW_OP_breg0 + kDwarfRip && ops[1].number == 0 &&
                       ops[2].atom == DW_OP_lit15 && ops[3].atom == DW_OP_and && ops[4].atom >= DW_OP_lit0 &&
                       ops[4].atom <= DW_OP_lit15 && ops[5].atom == DW_OP_ge && ops[6].atom == DW_OP_lit3 &&
                       ops[7].atom == DW_OP_shl && ops[8].atom == DW_OP_plus;
  if (!pattern) return std::nullopt;
  return (address & 15) >= static_cast<uint64_t>(ops[4].atom - DW_OP_lit0) ? 16 : 8;
}

// The rule of one CFI row, checked against what the walker assumes.
// `plt_address`: the link address of the row's instruction, to evaluate a
// lazy .plt entry's CFA expression (offline unwinding only: the kernel's
// rules are per return address, never inside a .plt entry).
mt_unwind_rule rule_of(Dwarf_Frame* frame, std::optional<uint64_t> plt_address) {
  bool signal_frame = false;
  if (dwarf_frame_info(frame, nullptr, nullptr, &signal_frame) != kDwarfRip) return flagged(MT_RULE_UNSUPPORTED);
  // The caller of a signal frame is the interrupted state, in a ucontext
  // the kernel's walker does not read (the offline unwinder does).
  if (signal_frame) return flagged(MT_RULE_UNSUPPORTED | MT_RULE_SIGNAL_FRAME);

  Dwarf_Op mem[3];
  Dwarf_Op* ops = nullptr;
  size_t nops = 0;
  if (dwarf_frame_register(frame, kDwarfRip, mem, &ops, &nops) != 0) return flagged(MT_RULE_UNSUPPORTED);
  // Undefined (nops 0, ops set) rather than same-value (ops null): no caller.
  if (nops == 0 && ops != nullptr) return flagged(MT_RULE_OUTERMOST);
  if (saved_at_cfa_offset(ops, nops) != -8) return flagged(MT_RULE_UNSUPPORTED);

  // The caller's rsp must be the CFA: libdw's x86-64 ABI rule val_offset(0).
  if (dwarf_frame_register(frame, kDwarfRsp, mem, &ops, &nops) != 0 || nops != 2 ||
      ops[0].atom != DW_OP_call_frame_cfa || ops[1].atom != DW_OP_stack_value)
    return flagged(MT_RULE_UNSUPPORTED);

  // libdw 0.188 turns def_cfa into DW_OP_bregx reg off; a CFA expression of
  // one DW_OP_bregN is the same thing.
  if (dwarf_frame_cfa(frame, &ops, &nops) != 0 || nops == 0) return flagged(MT_RULE_UNSUPPORTED);
  uint64_t cfa_reg;
  int64_t cfa_offset;
  if (nops == 1 && ops[0].atom == DW_OP_bregx) {
    cfa_reg = ops[0].number;
    cfa_offset = static_cast<int64_t>(ops[0].number2);
  } else if (nops == 1 && ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31) {
    cfa_reg = ops[0].atom - DW_OP_breg0;
    cfa_offset = static_cast<int64_t>(ops[0].number);
  } else if (auto plt = plt_address ? lazy_plt_cfa_offset(ops, nops, *plt_address) : std::nullopt) {
    cfa_reg = kDwarfRsp;
    cfa_offset = *plt;
  } else {
    return flagged(MT_RULE_UNSUPPORTED);
  }
  mt_unwind_rule rule{};
  if (cfa_reg == kDwarfRsp) {
    rule.cfa_reg = MT_CFA_RSP;
  } else if (cfa_reg == kDwarfRbp) {
    rule.cfa_reg = MT_CFA_RBP;
  } else {
    return flagged(MT_RULE_UNSUPPORTED);
  }
  auto offset = to_s32(cfa_offset);
  if (!offset) return flagged(MT_RULE_UNSUPPORTED);
  rule.cfa_offset = *offset;

  if (dwarf_frame_register(frame, kDwarfRbp, mem, &ops, &nops) != 0) return flagged(MT_RULE_UNSUPPORTED);
  // nops 0: same value, or undefined, which for a callee-saved register the
  // ABI lets us read as unchanged.
  if (nops == 0) return rule;
  auto saved = saved_at_cfa_offset(ops, nops);
  auto rbp_offset = saved ? to_s32(*saved) : std::nullopt;
  if (!rbp_offset) return flagged(MT_RULE_UNSUPPORTED);
  rule.flags = MT_RULE_RBP_SAVED;
  rule.rbp_offset = *rbp_offset;
  return rule;
}

// An executable PT_LOAD: file bytes [offset, offset + size) at `address`.
struct Segment {
  uint64_t offset;
  uint64_t size;
  uint64_t address;
};

struct FreeFrame {
  void operator()(Dwarf_Frame* frame) const { std::free(frame); }
};

}  // namespace

struct ModuleCfi::Impl {
  std::unique_ptr<ElfFile> file;
  Elf* elf = nullptr;  // file's
  Dwarf_CFI* eh_frame = nullptr;  // ours: dwarf_cfi_end
  Dwarf* dwarf = nullptr;         // for .debug_frame, whose Dwarf_CFI it owns
  Dwarf_CFI* debug_frame = nullptr;
  std::vector<Segment> segments;
  std::mutex mutex;

  ~Impl() {
    if (eh_frame) dwarf_cfi_end(eh_frame);
    if (dwarf) dwarf_end(dwarf);
  }

  std::optional<uint64_t> address_of(uint64_t file_offset) const {
    for (const Segment& s : segments)
      if (file_offset >= s.offset && file_offset - s.offset < s.size) return s.address + (file_offset - s.offset);
    return std::nullopt;
  }

  // The CFI row of link address `address` (its rules hold on [start, end)):
  // .eh_frame's, else .debug_frame's; null when neither describes it.
  // `first_cfi`: it is from the first of the two consulted, so any address
  // of the row gets the same row. Under the mutex.
  std::unique_ptr<Dwarf_Frame, FreeFrame> row_at(uint64_t address, bool* first_cfi) {
    *first_cfi = true;
    for (Dwarf_CFI* cfi : {eh_frame, debug_frame}) {
      Dwarf_Frame* frame = nullptr;
      if (cfi && dwarf_cfi_addrframe(cfi, address, &frame) == 0) return std::unique_ptr<Dwarf_Frame, FreeFrame>(frame);
      if (cfi) *first_cfi = false;
    }
    return nullptr;
  }

  std::optional<mt_unwind_rule> rule_at(uint64_t file_offset, bool evaluate_plt) {
    auto address = address_of(file_offset);
    if (!address) return std::nullopt;
    std::lock_guard lock(mutex);
    bool first_cfi;
    auto row = row_at(*address, &first_cfi);
    if (!row) return std::nullopt;
    return rule_of(row.get(), evaluate_plt ? address : std::nullopt);
  }

  std::vector<std::optional<mt_unwind_rule>> rules_at(const std::vector<uint64_t>& file_offsets) {
    std::vector<std::optional<mt_unwind_rule>> rules(file_offsets.size());
    std::lock_guard lock(mutex);
    // The last row evaluated, when any address in it gets it again.
    Dwarf_Addr start = 1, end = 0;
    mt_unwind_rule rule{};
    for (size_t i = 0; i < file_offsets.size(); ++i) {
      auto address = address_of(file_offsets[i]);
      if (!address) continue;
      if (*address < start || *address >= end) {
        bool first_cfi;
        auto row = row_at(*address, &first_cfi);
        if (!row) continue;
        rule = rule_of(row.get(), std::nullopt);
        if (!first_cfi || dwarf_frame_info(row.get(), &start, &end, nullptr) < 0) {
          start = 1;  // not for another address
          end = 0;
        }
      }
      rules[i] = rule;
    }
    return rules;
  }

  // Reads the headers and finds the CFI of `file`.
  void open_elf(std::unique_ptr<ElfFile> opened);
};

ModuleCfi::ModuleCfi(const std::string& path) : impl_(std::make_unique<Impl>()) {
  impl_->open_elf(std::make_unique<ElfFile>(path));
}

ModuleCfi::ModuleCfi(const std::string& name, std::vector<char> image) : impl_(std::make_unique<Impl>()) {
  impl_->open_elf(std::make_unique<ElfFile>(name, std::move(image)));
}

void ModuleCfi::Impl::open_elf(std::unique_ptr<ElfFile> opened) {
  file = std::move(opened);
  elf = file->elf();
  GElf_Ehdr ehdr;
  if (!gelf_getehdr(elf, &ehdr)) file->fail("unreadable ELF header", true);
  if (ehdr.e_ident[EI_CLASS] != ELFCLASS64 || ehdr.e_machine != EM_X86_64) file->fail("not an x86-64 ELF file");
  size_t count = 0;
  if (elf_getphdrnum(elf, &count) != 0) file->fail("unreadable program headers", true);
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr phdr;
    if (!gelf_getphdr(elf, static_cast<int>(i), &phdr)) file->fail("unreadable program headers", true);
    if (phdr.p_type == PT_LOAD && (phdr.p_flags & PF_X))
      segments.push_back({phdr.p_offset, phdr.p_filesz, phdr.p_vaddr});
  }
  // Either may be missing: lookups then fall through to the other.
  eh_frame = dwarf_getcfi_elf(elf);
  dwarf = dwarf_begin_elf(elf, DWARF_C_READ, nullptr);
  if (dwarf) debug_frame = dwarf_getcfi(dwarf);
}

ModuleCfi::~ModuleCfi() = default;

std::optional<mt_unwind_rule> ModuleCfi::rule_at_return_address(uint64_t return_address_file_offset) const {
  if (return_address_file_offset == 0) return std::nullopt;
  return impl_->rule_at(return_address_file_offset - 1, false);
}

std::vector<std::optional<mt_unwind_rule>> ModuleCfi::rules_at_return_addresses(
    const std::vector<uint64_t>& offsets) const {
  // Each is evaluated inside its call instruction, as rule_at_return_address does.
  std::vector<uint64_t> in_calls(offsets.size());
  for (size_t i = 0; i < offsets.size(); ++i) in_calls[i] = offsets[i] == 0 ? ~uint64_t{0} : offsets[i] - 1;
  return impl_->rules_at(in_calls);
}

std::optional<mt_unwind_rule> ModuleCfi::rule_at_pc(uint64_t pc_file_offset) const {
  return impl_->rule_at(pc_file_offset, false);
}

std::optional<mt_unwind_rule> ModuleCfi::offline_rule_at_pc(uint64_t pc_file_offset) const {
  return impl_->rule_at(pc_file_offset, true);
}

}  // namespace memtrack
