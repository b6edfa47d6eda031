#include "record/probes/probe_placement.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <vector>

namespace memtrack {
namespace {

constexpr std::size_t kMaxSkipped = 4;          // instructions walked over
constexpr uint64_t kMaxProbeOffset = 32;        // bytes from the entry
constexpr std::size_t kMaxScannedBody = 256 * 1024;  // back-branch check

// asm/nops.h, CONFIG_64BIT: the NOPs branch_setup_xol_ops compares against.
constexpr std::array<std::array<uint8_t, 8>, 8> kCanonicalNops = {{
    {0x90},
    {0x66, 0x90},
    {0x0f, 0x1f, 0x00},
    {0x0f, 0x1f, 0x40, 0x00},
    {0x0f, 0x1f, 0x44, 0x00, 0x00},
    {0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00},
    {0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00},
    {0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00},
}};

struct Prefixes {
  bool bad = false;       // 26/2e/36/3e/f0: the kernel refuses the probe
  bool opsize = false;    // 66
  bool other = false;     // f2/f3/67: rep, bnd, mandatory SSE prefixes
  std::size_t opcode_at = 0;  // index of the first opcode byte
};

Prefixes scan_prefixes(std::span<const uint8_t> insn) {
  Prefixes p;
  std::size_t i = 0;
  for (; i < insn.size(); ++i) {
    uint8_t b = insn[i];
    if (b == 0x26 || b == 0x2e || b == 0x36 || b == 0x3e || b == 0xf0) {
      p.bad = true;
    } else if (b == 0x66) {
      p.opsize = true;
    } else if (b == 0xf2 || b == 0xf3 || b == 0x67) {
      p.other = true;
    } else if (b != 0x64 && b != 0x65) {  // fs/gs: TLS, stack protector
      break;
    }
  }
  if (i < insn.size() && (insn[i] & 0xf0) == 0x40) ++i;  // REX
  p.opcode_at = i;
  return p;
}

// What arch_uprobe_analyze_insn of Linux 6.18 emulates (see the header).
std::string_view emulated_kind(std::span<const uint8_t> insn) {
  Prefixes p = scan_prefixes(insn);
  if (p.bad || p.opcode_at >= insn.size()) return {};
  for (std::size_t n = 1; n <= kCanonicalNops.size(); ++n) {
    if (insn.size() == n && std::equal(insn.begin(), insn.end(), kCanonicalNops[n - 1].begin()))
      return n == 5 ? "nop5" : "nop";
  }
  uint8_t op = insn[p.opcode_at];
  bool has_second = p.opcode_at + 1 < insn.size();
  std::string_view branch;
  if (op == 0xeb || op == 0xe9) branch = "jmp";
  else if (op == 0xe8) branch = "call";
  else if (op >= 0x70 && op <= 0x7f) branch = "jcc";
  else if (op == 0x0f && has_second && insn[p.opcode_at + 1] >= 0x80 && insn[p.opcode_at + 1] <= 0x8f)
    branch = "jcc";
  if (!branch.empty()) return p.opsize ? std::string_view{} : branch;
  if (insn.size() == 1 && op >= 0x50 && op <= 0x57) return "push";
  if (insn.size() == 2 && insn[0] == 0x41 && insn[1] >= 0x50 && insn[1] <= 0x57) return "push";
  return {};
}

// Whether writing `reg` changes what the probe reads.
bool is_probe_visible_register(unsigned reg, ArgumentMask read_arguments) {
  int argument = -1;
  switch (reg) {
    case X86_REG_RDI: case X86_REG_EDI: case X86_REG_DI: case X86_REG_DIL:
      argument = 0; break;
    case X86_REG_RSI: case X86_REG_ESI: case X86_REG_SI: case X86_REG_SIL:
      argument = 1; break;
    case X86_REG_RDX: case X86_REG_EDX: case X86_REG_DX: case X86_REG_DL: case X86_REG_DH:
      argument = 2; break;
    case X86_REG_RCX: case X86_REG_ECX: case X86_REG_CX: case X86_REG_CL: case X86_REG_CH:
      argument = 3; break;
    case X86_REG_R8: case X86_REG_R8D: case X86_REG_R8W: case X86_REG_R8B:
      argument = 4; break;
    case X86_REG_R9: case X86_REG_R9D: case X86_REG_R9W: case X86_REG_R9B:
      argument = 5; break;
    // The return-address slot, the frame chain, the instruction pointer.
    case X86_REG_RSP: case X86_REG_ESP: case X86_REG_SP: case X86_REG_SPL:
    case X86_REG_RBP: case X86_REG_EBP: case X86_REG_BP: case X86_REG_BPL:
    case X86_REG_RIP: case X86_REG_EIP: case X86_REG_IP:
      return true;
    default:
      return false;
  }
  return (read_arguments >> argument) & 1;
}

// Capstone 4 misses implicit effects of some instructions (enter writes
// nothing, cmpxchg no memory), so only plain data instructions whose effects
// are all explicit operands may be walked over.
bool is_plain_data_instruction(unsigned id) {
  switch (id) {
    case X86_INS_ENDBR64: case X86_INS_NOP:
    case X86_INS_TEST: case X86_INS_CMP:
    case X86_INS_MOV: case X86_INS_MOVABS: case X86_INS_MOVZX: case X86_INS_MOVSX:
    case X86_INS_MOVSXD: case X86_INS_LEA:
    case X86_INS_ADD: case X86_INS_SUB: case X86_INS_AND: case X86_INS_OR: case X86_INS_XOR:
    case X86_INS_INC: case X86_INS_DEC: case X86_INS_NEG: case X86_INS_NOT:
    case X86_INS_SHL: case X86_INS_SHR: case X86_INS_SAR:
      return true;
    default:
      return false;
  }
}

bool writes_first_operand(unsigned id) {
  return id != X86_INS_TEST && id != X86_INS_CMP && id != X86_INS_NOP && id != X86_INS_ENDBR64;
}

}  // namespace

InstructionDecoder::InstructionDecoder() {
  if (cs_open(CS_ARCH_X86, CS_MODE_64, &handle_) != CS_ERR_OK)
    throw std::runtime_error("capstone: cannot open an x86-64 decoder");
  cs_option(handle_, CS_OPT_DETAIL, CS_OPT_ON);
  insn_ = cs_malloc(handle_);
  if (insn_ == nullptr) {
    cs_close(&handle_);
    throw std::runtime_error("capstone: out of memory");
  }
}

InstructionDecoder::~InstructionDecoder() {
  cs_free(insn_, 1);
  cs_close(&handle_);
}

std::optional<DecodedInsn> InstructionDecoder::decode(std::span<const uint8_t> code,
                                                      std::size_t offset,
                                                      ArgumentMask read_arguments) {
  if (offset >= code.size()) return std::nullopt;
  const uint8_t* ptr = code.data() + offset;
  std::size_t size = code.size() - offset;
  uint64_t address = offset;
  if (!cs_disasm_iter(handle_, &ptr, &size, &address, insn_)) return std::nullopt;

  DecodedInsn out;
  out.length = insn_->size;
  out.mnemonic = insn_->mnemonic;
  std::span<const uint8_t> bytes = code.subspan(offset, out.length);
  out.emulated = emulated_kind(bytes);

  const cs_x86& x86 = insn_->detail->x86;
  if ((cs_insn_group(handle_, insn_, CS_GRP_JUMP) || cs_insn_group(handle_, insn_, CS_GRP_CALL)) &&
      x86.op_count == 1 && x86.operands[0].type == X86_OP_IMM) {
    out.branch_target = x86.operands[0].imm;
  }

  bool transparent = is_plain_data_instruction(insn_->id);
  if (transparent && insn_->id != X86_INS_ENDBR64) {
    Prefixes p = scan_prefixes(bytes);
    transparent = !p.bad && !p.other;
  }
  for (uint8_t i = 0; transparent && i < x86.op_count; ++i) {
    const cs_x86_op& op = x86.operands[i];
    bool written = (op.access & CS_AC_WRITE) != 0 || (i == 0 && writes_first_operand(insn_->id));
    if (!written) continue;
    if (op.type == X86_OP_MEM) transparent = false;
    if (op.type == X86_OP_REG && is_probe_visible_register(op.reg, read_arguments))
      transparent = false;
  }
  if (transparent) {
    cs_regs read, written;
    uint8_t read_count = 0, write_count = 0;
    if (cs_regs_access(handle_, insn_, read, &read_count, written, &write_count) != CS_ERR_OK) {
      transparent = false;
    }
    for (uint8_t i = 0; transparent && i < write_count; ++i) {
      if (is_probe_visible_register(written[i], read_arguments)) transparent = false;
    }
  }
  out.transparent = transparent;
  return out;
}

ProbePlacement choose_probe_offset(InstructionDecoder& decoder, std::span<const uint8_t> code,
                              FunctionExtent extent, ArgumentMask read_arguments) {
  std::optional<DecodedInsn> insn = decoder.decode(code, 0, read_arguments);
  if (!insn) return {0, "entry: undecodable"};
  if (!insn->emulated.empty()) return {0, "entry: " + std::string(insn->emulated) + " (emulated)"};

  std::string stepped = "entry: single-stepped (" + insn->mnemonic;
  if (extent == FunctionExtent::unknown_end) return {0, stepped + "; function size unknown)"};

  // Walk over transparent instructions to the first emulated one.
  std::vector<std::string> skipped;
  uint64_t offset = 0;
  while (true) {
    if (!insn->transparent) return {0, stepped + ")"};
    skipped.push_back(insn->mnemonic);
    offset += insn->length;
    if (skipped.size() > kMaxSkipped || offset > kMaxProbeOffset) return {0, stepped + ")"};
    insn = decoder.decode(code, offset, read_arguments);
    if (!insn) return {0, stepped + ")"};
    if (!insn->emulated.empty()) break;
  }

  // Every call passes the new spot once only if nothing in the body branches
  // back into (entry, spot]; a branch to the entry itself behaves the same
  // as for an entry probe. Indirect branches (jump tables) are not followed:
  // compilers do not aim them at a function's first instructions.
  if (code.size() > kMaxScannedBody) return {0, stepped + "; function too large to check)"};
  for (std::size_t at = 0; at < code.size();) {
    std::optional<DecodedInsn> body = decoder.decode(code, at);
    if (!body) return {0, stepped + "; body not decodable)"};
    if (body->branch_target && *body->branch_target > 0 &&
        static_cast<uint64_t>(*body->branch_target) <= offset) {
      return {0, stepped + "; +" + std::to_string(*body->branch_target) + " is a branch target)"};
    }
    at += body->length;
  }

  std::string reason = "+" + std::to_string(offset) + ": " + std::string(insn->emulated) + " after ";
  for (std::size_t i = 0; i < skipped.size(); ++i) reason += (i ? ", " : "") + skipped[i];
  return {offset, reason + " (emulated)"};
}

}  // namespace memtrack
