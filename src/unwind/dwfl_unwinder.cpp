#include "unwind/dwfl_unwinder.h"

#include <elfutils/libdwfl.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

#include "module/elf_file.h"
#include "module/module_elf.h"
#include "unwind/dwarf_registers.h"

namespace memtrack {
namespace {

constexpr uint64_t kPage = 4096;
// libdwfl wants a process and thread id; only our callbacks ever see them.
constexpr pid_t kThreadId = 1;

// The load bias of the file of `m` (address = bias + p_vaddr): the PT_LOAD
// whose page-aligned file range holds the mapping's file offset placed at
// the mapping's start, an executable one first (module/module_elf.h).
// nullopt (and *why) when no segment of the file fits the mapping.
std::optional<uint64_t> bias_of(const DwflMapping& m, std::string* why) {
  std::vector<LoadSegment> segments;
  try {
    segments = ElfFile(m.path).load_segments();
  } catch (const ElfError& e) {
    *why = e.what();
    return std::nullopt;
  }
  std::optional<uint64_t> bias = memtrack::load_bias(segments, m.start, m.file_offset, true, kPage);
  if (!bias) {
    char off[32];
    std::snprintf(off, sizeof(off), "0x%" PRIx64, m.file_offset);
    *why = m.path + ": no PT_LOAD holds file offset " + off;
  }
  return bias;
}

}  // namespace

struct DwflUnwinder::Impl {
  size_t max_frames = 0;
  char* debuginfo_path = nullptr;
  Dwfl_Callbacks callbacks{};
  Dwfl_Thread_Callbacks thread_callbacks{};
  Dwfl* dwfl = nullptr;
  std::string error;
  size_t modules = 0;

  // The definition being unwound.
  const StackDefinition* definition = nullptr;
  // The last read outside the copy since the last frame was reported.
  std::optional<uint64_t> failed_read;

  ~Impl() {
    if (dwfl) dwfl_end(dwfl);
  }

  static pid_t next_thread(Dwfl*, void* arg, void** thread_arg) {
    if (*thread_arg) return 0;  // the one thread was given
    *thread_arg = arg;          // what set_initial_registers receives
    return kThreadId;
  }

  static bool memory_read(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void* arg) {
    auto* self = static_cast<Impl*>(arg);
    const StackDefinition& d = *self->definition;
    if (addr < d.sp || d.bytes.size() < 8 || addr - d.sp > d.bytes.size() - 8) {
      self->failed_read = addr;  // outside the copy: the unwinder cannot know it
      return false;
    }
    std::memcpy(result, d.bytes.data() + (addr - d.sp), 8);
    return true;
  }

  static bool set_initial_registers(Dwfl_Thread* thread, void* thread_arg) {
    auto* self = static_cast<Impl*>(thread_arg);
    Dwarf_Word regs[kUnwindRegisters];
    std::copy_n(self->definition->regs.begin(), kUnwindRegisters, regs);
    if (!dwfl_thread_state_registers(thread, 0, kUnwindRegisters, regs)) return false;
    dwfl_thread_state_register_pc(thread, regs[16]);
    return true;
  }

  UnwindStop why_unreadable(uint64_t address) const {
    const StackDefinition& d = *definition;
    if (address < d.sp) return UnwindStop::BadCfa;
    return d.truncated || address - d.sp < d.bytes.size() + kTruncationSlack ? UnwindStop::TruncatedCopy
                                                                            : UnwindStop::BadCfa;
  }
};

DwflUnwinder::DwflUnwinder(const std::vector<DwflMapping>& mappings, size_t max_frames)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.max_frames = max_frames;
  elf_version(EV_CURRENT);
  m.callbacks.find_elf = dwfl_build_id_find_elf;
  m.callbacks.find_debuginfo = dwfl_standard_find_debuginfo;
  m.callbacks.section_address = dwfl_offline_section_address;
  m.callbacks.debuginfo_path = &m.debuginfo_path;
  m.dwfl = dwfl_begin(&m.callbacks);
  if (!m.dwfl) {
    m.error = std::string("dwfl_begin: ") + dwfl_errmsg(-1);
    return;
  }
  dwfl_report_begin(m.dwfl);
  std::map<std::string, uint64_t> reported;  // path -> bias
  for (const auto& mapping : mappings) {
    if (mapping.path.empty() || mapping.path[0] != '/' || mapping.path.ends_with(" (deleted)")) continue;
    std::string why;
    std::optional<uint64_t> bias = bias_of(mapping, &why);
    if (!bias) {
      m.error += why + "; ";
      continue;
    }
    auto [it, first] = reported.try_emplace(mapping.path, *bias);
    if (!first) {
      // Every executable segment of one placement must agree on the bias.
      if (it->second != *bias) m.error += mapping.path + ": two load biases; ";
      continue;
    }
    if (!dwfl_report_elf(m.dwfl, mapping.path.c_str(), mapping.path.c_str(), -1, *bias, /*add_p_vaddr=*/true))
      m.error += "dwfl_report_elf " + mapping.path + ": " + dwfl_errmsg(-1) + "; ";
  }
  if (dwfl_report_end(m.dwfl, nullptr, nullptr) != 0) m.error += std::string("dwfl_report_end: ") + dwfl_errmsg(-1);
  m.modules = reported.size();
  m.thread_callbacks.next_thread = Impl::next_thread;
  m.thread_callbacks.memory_read = Impl::memory_read;
  m.thread_callbacks.set_initial_registers = Impl::set_initial_registers;
  if (m.error.empty() && !dwfl_attach_state(m.dwfl, nullptr, kThreadId, &m.thread_callbacks, &m))
    m.error = std::string("dwfl_attach_state: ") + dwfl_errmsg(-1);
}

DwflUnwinder::~DwflUnwinder() = default;

const std::string& DwflUnwinder::error() const { return impl_->error; }
size_t DwflUnwinder::modules() const { return impl_->modules; }

UnwoundStack DwflUnwinder::unwind(const StackDefinition& definition, std::vector<uint64_t>* frame_sps) {
  Impl& m = *impl_;
  UnwoundStack out;
  if (frame_sps) frame_sps->clear();
  if (!m.error.empty()) {
    out.stop = UnwindStop::NoModule;
    return out;
  }
  if (definition.regs.size() < kUnwindRegisters) {
    out.stop = UnwindStop::BadCfa;
    return out;
  }
  m.definition = &definition;
  m.failed_read.reset();

  struct Collect {
    Impl* impl;
    UnwoundStack* out;
    std::vector<uint64_t>* sps;
    uint64_t last_pc = 0;
    bool last_activation = true;
    bool first = true;
    bool limit = false;
  } collect{&m, &out, frame_sps};
  const int rc = dwfl_getthread_frames(
      m.dwfl, kThreadId,
      [](Dwfl_Frame* frame, void* arg) -> int {
        auto* c = static_cast<Collect*>(arg);
        c->impl->failed_read.reset();  // reads for this frame's own unwind follow
        Dwarf_Addr pc = 0;
        bool activation = false;
        if (!dwfl_frame_pc(frame, &pc, &activation)) return DWARF_CB_ABORT;
        c->last_pc = pc;
        c->last_activation = activation;
        if (c->first) {  // the allocator's own frame: regs[16]
          c->first = false;
          return DWARF_CB_OK;
        }
        if (c->out->return_addresses.size() >= c->impl->max_frames) {
          c->limit = true;
          return DWARF_CB_ABORT;
        }
        c->out->return_addresses.push_back(pc);
        if (c->sps) {
          Dwarf_Word sp = 0;
          c->sps->push_back(dwfl_frame_reg(frame, kDwarfRsp, &sp) == 0 ? sp : 0);
        }
        return DWARF_CB_OK;
      },
      &collect);

  if (collect.limit) {
    out.stop = UnwindStop::FrameLimit;
  } else if (m.failed_read) {
    out.stop = m.why_unreadable(*m.failed_read);
    out.stop_address = collect.last_pc;
  } else if (rc == 0) {
    out.stop = UnwindStop::Complete;
  } else {
    const uint64_t lookup = collect.last_activation ? collect.last_pc : collect.last_pc - 1;
    out.stop = dwfl_addrmodule(m.dwfl, lookup) ? UnwindStop::NoCfi : UnwindStop::NoModule;
    out.stop_address = collect.last_pc;
  }
  m.definition = nullptr;
  return out;
}

std::string DwflUnwinder::describe(uint64_t pc, bool activation) const {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, pc);
  std::string s = buf;
  if (!impl_->dwfl) return s;
  const uint64_t lookup = activation ? pc : pc - 1;
  Dwfl_Module* mod = dwfl_addrmodule(impl_->dwfl, lookup);
  if (!mod) return s + " (no module)";
  GElf_Off off = 0;
  GElf_Sym sym;
  const char* name = dwfl_module_addrinfo(mod, lookup, &off, &sym, nullptr, nullptr, nullptr);
  const char* file = dwfl_module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  std::snprintf(buf, sizeof(buf), "+0x%" PRIx64, static_cast<uint64_t>(off + (activation ? 0 : 1)));
  return s + " " + (name ? name : "?") + (name ? buf : "") + " (" + (file ? file : "?") + ")";
}

}  // namespace memtrack
