#include "record/call_sites.h"

#include <gelf.h>

#include <algorithm>
#include <cstring>

#include "module/elf_file.h"

namespace memtrack {

namespace {

struct Segment {
  uint64_t offset, size, address;
};

// The length of a `call r/m64` (FF /2) from its opcode byte, given the bytes
// that follow it; 0 when they are not one. 64-bit addressing (the address-size
// prefix's 32-bit form has the same ModRM layout).
size_t indirect_call_length(const uint8_t* p, size_t left) {
  if (left < 2 || p[0] != 0xff || ((p[1] >> 3) & 7) != 2) return 0;
  uint8_t mod = p[1] >> 6, rm = p[1] & 7;
  size_t length = 2;
  if (mod == 3) return length;
  if (rm == 4) {  // a SIB byte; base 5 without displacement means disp32
    if (left < 3) return 0;
    if (mod == 0 && (p[2] & 7) == 5) length += 4;
    ++length;
  } else if (mod == 0 && rm == 5) {  // rip-relative
    length += 4;
  }
  length += mod == 1 ? 1 : mod == 2 ? 4 : 0;
  return length <= left ? length : 0;
}

}  // namespace

std::vector<uint64_t> return_address_offsets(const std::string& path) {
  ElfFile file(path);
  size_t count = 0;
  if (elf_getphdrnum(file.elf(), &count) != 0) file.fail("cannot read the program headers", true);
  size_t size = 0;
  const auto* image = reinterpret_cast<const uint8_t*>(elf_rawfile(file.elf(), &size));
  if (!image) file.fail("cannot read the file", true);

  std::vector<Segment> segments;
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr phdr;
    if (!gelf_getphdr(file.elf(), static_cast<int>(i), &phdr) || phdr.p_type != PT_LOAD || !(phdr.p_flags & PF_X))
      continue;
    if (phdr.p_offset > size || phdr.p_filesz > size - phdr.p_offset) file.fail("truncated executable segment");
    segments.push_back({phdr.p_offset, phdr.p_filesz, phdr.p_vaddr});
  }
  auto executable = [&](uint64_t address) {
    for (const Segment& s : segments)
      if (address >= s.address && address - s.address < s.size) return true;
    return false;
  };

  // Offsets stand in for addresses: a return address's file offset is what
  // the walker looks rules up by.
  std::vector<uint64_t> offsets;
  for (const Segment& s : segments) {
    const uint8_t* code = image + s.offset;
    for (uint64_t i = 0; i < s.size; ++i) {
      if (code[i] == 0xe8 && s.size - i >= 5) {
        int32_t displacement;
        std::memcpy(&displacement, code + i + 1, 4);
        if (executable(s.address + i + 5 + static_cast<int64_t>(displacement))) offsets.push_back(s.offset + i + 5);
      } else if (size_t length = indirect_call_length(code + i, s.size - i)) {
        offsets.push_back(s.offset + i + length);
      }
    }
  }
  // An E8 inside an indirect call's bytes may end before or after it.
  std::sort(offsets.begin(), offsets.end());
  offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());
  return offsets;
}

}  // namespace memtrack
