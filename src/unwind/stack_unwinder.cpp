#include "unwind/stack_unwinder.h"

#include <elf.h>

#include <cstring>
#include <optional>
#include <stdexcept>
#include <utility>

#include "unwind/dwarf_registers.h"

namespace memtrack {
namespace {

// The x86-64 rt_sigframe as __restore_rt finds it at rsp (the handler's
// `ret` popped pretcode): struct ucontext { uc_flags, uc_link, uc_stack (24
// bytes), uc_mcontext }, and mcontext's gregs in the order r8..r15, rdi, rsi,
// rbp, rbx, rdx, rax, rcx, rsp, rip.
constexpr uint64_t kUcontextGregs = 40;
constexpr uint64_t kGregRbp = 10;
constexpr uint64_t kGregRsp = 15;
constexpr uint64_t kGregRip = 16;

UnwindStep step_of(const std::optional<mt_unwind_rule>& rule) {
  UnwindStep step;
  if (!rule) return step;  // Kind::NoCfi
  step.rule = *rule;
  if (rule->flags & MT_RULE_SIGNAL_FRAME) {
    step.kind = UnwindStep::Kind::SignalFrame;
  } else if (rule->flags & MT_RULE_UNSUPPORTED) {
    step.kind = UnwindStep::Kind::Unsupported;
  } else if (rule->flags & MT_RULE_OUTERMOST) {
    step.kind = UnwindStep::Kind::Outermost;
  } else {
    step.kind = UnwindStep::Kind::Rule;
  }
  return step;
}

// A minimal ELF image libelf and libdw accept: the header, one program
// header per load segment (ModuleCfi maps file offsets through them; their
// contents are not in the image) and the CFI sections at their recorded
// addresses (.eh_frame_hdr before .eh_frame: libdw only uses a header it has
// seen first).
std::vector<char> elf_image(const ModuleInfo& info) {
  struct Section {
    const char* name;
    const SectionBytes* bytes;
    uint64_t flags;
  };
  std::vector<Section> sections;
  if (info.eh_frame_hdr) sections.push_back({".eh_frame_hdr", &*info.eh_frame_hdr, SHF_ALLOC});
  if (info.eh_frame) sections.push_back({".eh_frame", &*info.eh_frame, SHF_ALLOC});
  if (info.debug_frame) sections.push_back({".debug_frame", &*info.debug_frame, 0});

  auto align8 = [](uint64_t n) { return (n + 7) & ~uint64_t{7}; };
  std::string names(1, '\0');
  std::vector<Elf64_Shdr> shdrs(1);  // [0]: SHN_UNDEF
  uint64_t offset = sizeof(Elf64_Ehdr) + info.load_segments.size() * sizeof(Elf64_Phdr);
  for (const Section& s : sections) {
    offset = align8(offset);
    Elf64_Shdr sh{};
    sh.sh_name = static_cast<Elf64_Word>(names.size());
    sh.sh_type = SHT_PROGBITS;
    sh.sh_flags = s.flags;
    sh.sh_addr = s.bytes->address;
    sh.sh_offset = offset;
    sh.sh_size = s.bytes->bytes.size();
    sh.sh_addralign = 8;
    shdrs.push_back(sh);
    names.append(s.name).push_back('\0');
    offset += s.bytes->bytes.size();
  }
  Elf64_Shdr strtab{};
  strtab.sh_name = static_cast<Elf64_Word>(names.size());
  names.append(".shstrtab").push_back('\0');
  strtab.sh_type = SHT_STRTAB;
  strtab.sh_offset = offset;
  strtab.sh_size = names.size();
  strtab.sh_addralign = 1;
  shdrs.push_back(strtab);
  offset = align8(offset + names.size());

  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_DYN;
  eh.e_machine = EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_phoff = info.load_segments.empty() ? 0 : sizeof(Elf64_Ehdr);
  eh.e_shoff = offset;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = static_cast<Elf64_Half>(info.load_segments.size());
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = static_cast<Elf64_Half>(shdrs.size());
  eh.e_shstrndx = static_cast<Elf64_Half>(shdrs.size() - 1);
  if (info.load_segments.size() >= PN_XNUM) throw std::runtime_error(info.path + ": too many load segments");

  std::vector<char> image(offset + shdrs.size() * sizeof(Elf64_Shdr));
  std::memcpy(image.data(), &eh, sizeof eh);
  char* ph = image.data() + sizeof eh;
  for (const LoadSegment& seg : info.load_segments) {
    Elf64_Phdr p{};
    p.p_type = PT_LOAD;
    p.p_flags = seg.flags;
    p.p_offset = seg.offset;
    p.p_vaddr = p.p_paddr = seg.vaddr;
    p.p_filesz = seg.filesz;
    p.p_memsz = seg.memsz;
    p.p_align = 4096;
    std::memcpy(ph, &p, sizeof p);
    ph += sizeof p;
  }
  for (size_t i = 0; i < sections.size(); ++i) {
    const auto& bytes = sections[i].bytes->bytes;
    if (!bytes.empty()) std::memcpy(image.data() + shdrs[i + 1].sh_offset, bytes.data(), bytes.size());
  }
  std::memcpy(image.data() + strtab.sh_offset, names.data(), names.size());
  std::memcpy(image.data() + offset, shdrs.data(), shdrs.size() * sizeof(Elf64_Shdr));
  return image;
}

}  // namespace

UnwindModule::UnwindModule(const std::string& path) : cfi_(std::make_unique<ModuleCfi>(path)) {}

UnwindModule::UnwindModule(std::unique_ptr<ModuleCfi> cfi) : cfi_(std::move(cfi)) {}

std::unique_ptr<UnwindModule> UnwindModule::from_module_info(const ModuleInfo& info) {
  return std::unique_ptr<UnwindModule>(new UnwindModule(std::make_unique<ModuleCfi>(info.path, elf_image(info))));
}

UnwindStep UnwindModule::step_at(uint64_t file_offset) const { return step_of(cfi_->offline_rule_at_pc(file_offset)); }

const UnwindStep& UnwindCache::step_at(const UnwindModule& module, uint64_t file_offset) {
  auto [it, added] = steps_.try_emplace(Key{&module, file_offset});
  if (added) it->second = module.step_at(file_offset);
  return it->second;
}

bool StackCopy::read(uint64_t address, uint64_t* word) const {
  const size_t size = bytes_.size();
  if (address < sp_ || size < 8 || address - sp_ > size - 8) return false;
  std::memcpy(word, bytes_.data() + (address - sp_), 8);
  return true;
}

UnwindStop StackCopy::why_unreadable(uint64_t address) const {
  if (address < sp_) return UnwindStop::BadCfa;
  const uint64_t past_end = address - sp_;  // >= size - 7: the word ends beyond the copy
  return truncated_ || past_end < bytes_.size() + kTruncationSlack ? UnwindStop::TruncatedCopy : UnwindStop::BadCfa;
}

const char* unwind_stop_name(UnwindStop stop) {
  switch (stop) {
    case UnwindStop::Complete: return "complete";
    case UnwindStop::TruncatedCopy: return "truncated-copy";
    case UnwindStop::NoCfi: return "no-cfi";
    case UnwindStop::BadCfa: return "bad-cfa";
    case UnwindStop::NoModule: return "no-module";
    case UnwindStop::FrameLimit: return "frame-limit";
  }
  return "unknown";
}

StackUnwinder::StackUnwinder(size_t max_frames) : max_frames_(max_frames) {}

namespace {

// The unwind into `out` (a function of its own so that every early end is a
// plain return, and the result is built in place).
void walk(std::span<const uint64_t> regs, const CodeMap& map, UnwindCache& cache, const StackMemory& copy,
          size_t max_frames, UnwoundStack& out) {
  if (regs.size() < kUnwindRegisters) {
    out.stop = UnwindStop::BadCfa;
    return;
  }
  uint64_t pc = regs[kDwarfRip];
  uint64_t rsp = regs[kDwarfRsp];
  uint64_t rbp = regs[kDwarfRbp];
  // pc is the instruction about to run (the allocator's entry, or an
  // interrupted one), not a return address: look it up at pc, not pc - 1.
  bool activation = true;
  bool at_allocator_entry = true;  // the first frame: the definition's registers

  auto stop = [&](UnwindStop why) {
    out.stop = why;
    out.stop_address = pc;
  };
  // Records the caller's pc; false when the unwind ends with it.
  auto caller = [&](uint64_t next_pc, bool next_is_activation) {
    pc = next_pc;
    activation = next_is_activation;
    if (next_pc == 0) {
      out.stop = UnwindStop::Complete;
      return false;
    }
    if (out.return_addresses.size() >= max_frames) {
      out.stop = UnwindStop::FrameLimit;
      return false;
    }
    out.return_addresses.push_back(next_pc);
    return true;
  };

  for (;;) {
    const uint64_t lookup = activation ? pc : pc - 1;
    const CodeRange* range = map.find(lookup);
    if (!range) return stop(UnwindStop::NoModule);
    const UnwindStep* step = nullptr;
    if (range->module) step = &cache.step_at(*range->module, lookup - range->start + range->file_offset);

    // The allocator's entry without CFI here (its file missing, or none):
    // the probe sits where rsp is still as at the call (probe_placement.h),
    // so the return address is at [rsp], as the kernel's walk assumes.
    if (at_allocator_entry && (!step || step->kind == UnwindStep::Kind::NoCfi)) {
      at_allocator_entry = false;
      uint64_t return_address = 0;
      if (!copy.read(rsp, &return_address)) return stop(copy.why_unreadable(rsp));
      rsp += 8;
      if (!caller(return_address, false)) return;
      continue;
    }
    at_allocator_entry = false;
    // A file whose CFI is not available here (missing, the vDSO): stop, so
    // the report can say so (and unwind again once a Module record gives
    // the CFI), rather than follow an rbp that may not be a frame pointer.
    if (!step) return stop(UnwindStop::NoCfi);
    if (step->kind == UnwindStep::Kind::NoCfi) {
      // Code without CFI: the frame-pointer chain, [rbp] the caller's rbp,
      // [rbp + 8] the return address. Only upwards, inside the copy. Not for
      // an activation (the allocator's entry, an interrupted instruction):
      // before or inside its prologue rbp is still its caller's, and the
      // chain would silently skip that caller.
      if (activation) return stop(UnwindStop::NoCfi);
      uint64_t saved_rbp = 0, return_address = 0;
      if (rbp < rsp || rbp > UINT64_MAX - 16 || !copy.read(rbp, &saved_rbp) || !copy.read(rbp + 8, &return_address))
        return stop(UnwindStop::NoCfi);
      out.frame_pointer_fallback = true;
      rsp = rbp + 16;
      rbp = saved_rbp;
      if (!caller(return_address, false)) return;
      continue;
    }

    switch (step->kind) {
      case UnwindStep::Kind::Outermost:
        out.stop = UnwindStop::Complete;
        return;
      case UnwindStep::Kind::Unsupported:
        return stop(UnwindStop::NoCfi);
      case UnwindStep::Kind::SignalFrame: {
        // The interrupted state, saved by the kernel in the ucontext at rsp.
        const uint64_t gregs = rsp + kUcontextGregs;
        uint64_t next_pc = 0, next_rsp = 0, next_rbp = 0;
        for (auto [index, value] : {std::pair{kGregRip, &next_pc}, {kGregRsp, &next_rsp}, {kGregRbp, &next_rbp}})
          if (!copy.read(gregs + index * 8, value)) return stop(copy.why_unreadable(gregs + index * 8));
        // The signal frame lies below the interrupted frame's stack pointer.
        if (next_rsp <= rsp) return stop(UnwindStop::BadCfa);
        if (!activation && !out.return_addresses.empty())
          out.exact_pcs.push_back(static_cast<uint32_t>(out.return_addresses.size() - 1));
        rsp = next_rsp;
        rbp = next_rbp;
        if (!caller(next_pc, true)) return;
        out.exact_pcs.push_back(static_cast<uint32_t>(out.return_addresses.size() - 1));
        continue;
      }
      case UnwindStep::Kind::Rule:
      case UnwindStep::Kind::NoCfi:
        break;
    }

    const mt_unwind_rule& rule = step->rule;
    const uint64_t cfa = (rule.cfa_reg == MT_CFA_RBP ? rbp : rsp) + static_cast<int64_t>(rule.cfa_offset);
    // The return address is at cfa - 8, at or above rsp: a CFA that does not
    // grow would loop or read below the frame.
    if (rsp > UINT64_MAX - 8 || cfa < rsp + 8) return stop(UnwindStop::BadCfa);
    uint64_t return_address = 0;
    if (!copy.read(cfa - 8, &return_address)) return stop(copy.why_unreadable(cfa - 8));
    if (rule.flags & MT_RULE_RBP_SAVED) {
      const uint64_t slot = cfa + static_cast<int64_t>(rule.rbp_offset);
      if (!copy.read(slot, &rbp)) return stop(copy.why_unreadable(slot));
    }
    rsp = cfa;
    if (!caller(return_address, false)) return;
  }
}

}  // namespace

UnwoundStack StackUnwinder::unwind(std::span<const uint64_t> registers, const CodeMap& code, UnwindCache& cache,
                                   const StackMemory& stack) const {
  UnwoundStack out;
  walk(registers, code, cache, stack, max_frames_, out);
  return out;
}

}  // namespace memtrack
