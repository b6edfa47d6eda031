#include "record/call_sites.h"

#include <capstone/capstone.h>
#include <gelf.h>

#include <stdexcept>

#include "module/elf_file.h"

namespace memtrack {

std::vector<uint64_t> return_address_offsets(const std::string& path) {
  ElfFile file(path);
  size_t segments = 0;
  if (elf_getphdrnum(file.elf(), &segments) != 0) file.fail("cannot read the program headers", true);
  size_t size = 0;
  const auto* image = reinterpret_cast<const uint8_t*>(elf_rawfile(file.elf(), &size));
  if (!image) file.fail("cannot read the file", true);

  csh handle;
  if (cs_open(CS_ARCH_X86, CS_MODE_64, &handle) != CS_ERR_OK) throw std::runtime_error("capstone unavailable");
  cs_insn* insn = cs_malloc(handle);
  std::vector<uint64_t> offsets;
  for (size_t i = 0; i < segments; ++i) {
    GElf_Phdr phdr;
    if (!gelf_getphdr(file.elf(), static_cast<int>(i), &phdr) || phdr.p_type != PT_LOAD || !(phdr.p_flags & PF_X))
      continue;
    if (phdr.p_offset > size || phdr.p_filesz > size - phdr.p_offset) file.fail("truncated executable segment");
    // Offsets stand in for addresses: a return address's file offset is
    // what the walker looks rules up by.
    const uint8_t* code = image + phdr.p_offset;
    size_t left = phdr.p_filesz;
    uint64_t offset = phdr.p_offset;
    while (left > 0) {
      if (!cs_disasm_iter(handle, &code, &left, &offset, insn)) {
        ++code;  // not an instruction (padding, data): resynchronize
        --left;
        ++offset;
        continue;
      }
      if (insn->id == X86_INS_CALL) offsets.push_back(offset);  // offset is now past the call
    }
  }
  cs_free(insn, 1);
  cs_close(&handle);
  return offsets;
}

}  // namespace memtrack
