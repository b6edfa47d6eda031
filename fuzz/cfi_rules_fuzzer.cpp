// Unwind rules from the DWARF CFI (.eh_frame, .debug_frame) of arbitrary
// ELF images: what the recorder learns for the kernel's walker and what the
// offline unwinder reads from files and Module records.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "unwind/cfi_rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    memtrack::ModuleCfi cfi("fuzz-input", std::vector<char>(data, data + size));
    for (uint64_t offset = 0; offset < 0x3000; offset += 0x7) {
      cfi.rule_at_pc(offset);
      cfi.rule_at_return_address(offset);
      cfi.offline_rule_at_pc(offset);
    }
  } catch (const std::runtime_error&) {
    // Not an x86-64 ELF image with readable headers: refused with a message.
  }
  return 0;
}
