// A small offline unwinder for the integration tests: libdwfl (elfutils)
// unwinds a recorded raw stack copy (StackDefinition: sp, the 17 DWARF
// registers, the bytes from sp up) with the CFI of the files the process had
// mapped, as an independent check of the kernel's own walk.
//
// One DwflUnwinder per process: its executable placements are reported once
// (each file at its load bias), then unwind() runs libdwfl's frame unwinder on
// one definition at a time, reading memory only from that definition's copy.
#pragma once

#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace memtrack::testing {

// One executable mapping: [start, start + len) maps `path` from file_offset.
struct FileMapping {
  std::string path;
  uint64_t start = 0;
  uint64_t len = 0;
  uint64_t file_offset = 0;
};

// The load bias of the file of `m` (address = bias + p_vaddr): the PT_LOAD
// whose page-aligned file range starts at the mapping's file offset placed
// at the mapping's start. 0 for ET_EXEC. nullopt (and *why) when no segment
// of the file fits the mapping.
inline std::optional<uint64_t> load_bias(const FileMapping& m, std::string* why) {
  int fd = ::open(m.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = "cannot open " + m.path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  std::optional<uint64_t> bias;
  GElf_Ehdr ehdr;
  size_t phnum = 0;
  if (!elf || !gelf_getehdr(elf, &ehdr) || elf_getphdrnum(elf, &phnum) != 0) {
    *why = m.path + ": not a readable ELF file";
  } else if (ehdr.e_type == ET_EXEC) {
    bias = 0;
  } else {
    constexpr uint64_t kPage = 4096;
    for (size_t i = 0; i < phnum && !bias; ++i) {
      GElf_Phdr ph;
      if (!gelf_getphdr(elf, int(i), &ph) || ph.p_type != PT_LOAD) continue;
      // The kernel maps a segment from its page-aligned offset at its
      // page-aligned address plus the bias (p_vaddr ≡ p_offset mod page); a
      // mapping may start inside the segment (split by mprotect).
      uint64_t page_offset = ph.p_offset & ~(kPage - 1);
      if (m.file_offset < page_offset || m.file_offset >= ph.p_offset + ph.p_filesz) continue;
      bias = m.start - ((ph.p_vaddr & ~(kPage - 1)) + (m.file_offset - page_offset));
    }
    if (!bias) {
      char off[32];
      std::snprintf(off, sizeof(off), "0x%" PRIx64, m.file_offset);
      *why = m.path + ": no PT_LOAD holds file offset " + off;
    }
  }
  if (elf) elf_end(elf);
  ::close(fd);
  return bias;
}

class DwflUnwinder {
 public:
  struct Frame {
    uint64_t pc = 0;
    bool activation = false;  // the interrupted frame: pc is not a return address
    // The frame's rsp (DWARF 7) as libdwfl recovered it: for a caller frame,
    // the callee's CFA, so its pc was read from the word at sp - 8.
    std::optional<uint64_t> sp;
  };
  struct Result {
    std::vector<Frame> frames;  // innermost first
    bool complete = false;      // libdwfl ended at a frame without caller
    std::string error;          // otherwise, why it stopped
  };

  DwflUnwinder(int pid, const std::vector<FileMapping>& mappings) : pid_(pid) {
    callbacks_.find_elf = dwfl_build_id_find_elf;
    callbacks_.find_debuginfo = dwfl_standard_find_debuginfo;
    callbacks_.section_address = dwfl_offline_section_address;
    callbacks_.debuginfo_path = &debuginfo_path_;
    dwfl_ = dwfl_begin(&callbacks_);
    if (!dwfl_) {
      error_ = std::string("dwfl_begin: ") + dwfl_errmsg(-1);
      return;
    }
    dwfl_report_begin(dwfl_);
    std::map<std::string, uint64_t> reported;  // path -> bias
    for (const auto& m : mappings) {
      if (m.path.empty() || m.path[0] != '/' || m.path.ends_with(" (deleted)")) continue;
      std::string why;
      std::optional<uint64_t> bias = load_bias(m, &why);
      if (!bias) {
        error_ += why + "; ";
        continue;
      }
      auto [it, first] = reported.try_emplace(m.path, *bias);
      if (!first) {
        // Every executable segment of one placement must agree on the bias.
        if (it->second != *bias) error_ += m.path + ": two load biases; ";
        continue;
      }
      if (!dwfl_report_elf(dwfl_, m.path.c_str(), m.path.c_str(), -1, *bias, /*add_p_vaddr=*/true))
        error_ += "dwfl_report_elf " + m.path + ": " + dwfl_errmsg(-1) + "; ";
    }
    if (dwfl_report_end(dwfl_, nullptr, nullptr) != 0) error_ += std::string("dwfl_report_end: ") + dwfl_errmsg(-1);
    modules_ = reported.size();
    thread_callbacks_.next_thread = next_thread;
    thread_callbacks_.memory_read = memory_read;
    thread_callbacks_.set_initial_registers = set_initial_registers;
    if (error_.empty() && !dwfl_attach_state(dwfl_, nullptr, pid_, &thread_callbacks_, this))
      error_ = std::string("dwfl_attach_state: ") + dwfl_errmsg(-1);
  }
  ~DwflUnwinder() {
    if (dwfl_) dwfl_end(dwfl_);
  }
  DwflUnwinder(const DwflUnwinder&) = delete;
  DwflUnwinder& operator=(const DwflUnwinder&) = delete;

  // Empty when every file was reported and the state attached.
  const std::string& error() const { return error_; }
  size_t modules() const { return modules_; }

  // Unwinds thread `tid` from `regs` (17 DWARF registers, 16 = rip) with
  // memory [sp, sp + bytes.size()) only.
  Result unwind(int tid, uint64_t sp, std::span<const uint64_t> regs, std::span<const uint8_t> bytes,
                size_t max_frames = 512) {
    Result result;
    if (!error_.empty() || regs.size() != kRegs) {
      result.error = error_.empty() ? "expected 17 registers" : error_;
      return result;
    }
    tid_ = tid;
    sp_ = sp;
    bytes_ = bytes;
    std::copy(regs.begin(), regs.end(), regs_);
    struct Collect {
      Result* result;
      size_t max;
    } collect{&result, max_frames};
    int rc = dwfl_getthread_frames(
        dwfl_, tid,
        [](Dwfl_Frame* frame, void* arg) -> int {
          auto* c = static_cast<Collect*>(arg);
          Dwarf_Addr pc = 0;
          bool activation = false;
          if (!dwfl_frame_pc(frame, &pc, &activation)) {
            c->result->error = std::string("dwfl_frame_pc: ") + dwfl_errmsg(-1);
            return DWARF_CB_ABORT;
          }
          Dwarf_Word sp = 0;
          std::optional<uint64_t> frame_sp;
          if (dwfl_frame_reg(frame, 7, &sp) == 0) frame_sp = sp;
          c->result->frames.push_back({pc, activation, frame_sp});
          if (c->result->frames.size() >= c->max) {
            c->result->error = "frame limit";
            return DWARF_CB_ABORT;
          }
          return DWARF_CB_OK;
        },
        &collect);
    if (rc == 0) result.complete = true;
    else if (rc == -1) result.error = dwfl_errmsg(-1);
    bytes_ = {};
    return result;
  }

  // "symbol+0xoff (file)" for diagnostics; `pc` a return address unless
  // `activation` (looked up at pc - 1, like the unwinder does).
  std::string describe(uint64_t pc, bool activation) const {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "0x%" PRIx64, pc);
    std::string s = buf;
    if (!dwfl_) return s;
    uint64_t lookup = activation ? pc : pc - 1;
    Dwfl_Module* mod = dwfl_addrmodule(dwfl_, lookup);
    if (!mod) return s + " (no module)";
    GElf_Off off = 0;
    GElf_Sym sym;
    const char* name = dwfl_module_addrinfo(mod, lookup, &off, &sym, nullptr, nullptr, nullptr);
    const char* file = dwfl_module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    std::snprintf(buf, sizeof(buf), "+0x%" PRIx64, uint64_t(off + (activation ? 0 : 1)));
    return s + " " + (name ? name : "?") + (name ? buf : "") + " (" + (file ? file : "?") + ")";
  }

 private:
  static constexpr size_t kRegs = 17;

  static pid_t next_thread(Dwfl*, void* arg, void** thread_arg) {
    auto* self = static_cast<DwflUnwinder*>(arg);
    if (*thread_arg) return 0;  // the one thread was given
    *thread_arg = self;
    return self->tid_;
  }
  static bool memory_read(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void* arg) {
    auto* self = static_cast<DwflUnwinder*>(arg);
    if (addr < self->sp_ || addr - self->sp_ > self->bytes_.size() || self->bytes_.size() - (addr - self->sp_) < 8)
      return false;  // outside the copy: the unwinder cannot know it
    std::memcpy(result, self->bytes_.data() + (addr - self->sp_), 8);
    return true;
  }
  static bool set_initial_registers(Dwfl_Thread* thread, void* thread_arg) {
    auto* self = static_cast<DwflUnwinder*>(thread_arg);
    Dwarf_Word regs[kRegs];
    std::copy(self->regs_, self->regs_ + kRegs, regs);
    if (!dwfl_thread_state_registers(thread, 0, kRegs, regs)) return false;
    dwfl_thread_state_register_pc(thread, regs[16]);
    return true;
  }

  int pid_;
  char* debuginfo_path_ = nullptr;
  Dwfl_Callbacks callbacks_{};
  Dwfl_Thread_Callbacks thread_callbacks_{};
  Dwfl* dwfl_ = nullptr;
  std::string error_;
  size_t modules_ = 0;
  // The definition being unwound.
  int tid_ = 0;
  uint64_t sp_ = 0;
  uint64_t regs_[kRegs] = {};
  std::span<const uint8_t> bytes_;
};

}  // namespace memtrack::testing
