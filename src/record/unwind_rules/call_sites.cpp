#include "record/unwind_rules/call_sites.h"

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
  const uint64_t size = file.file_size();

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
  // the walker looks rules up by. The code is read in chunks (ElfFile::read_bytes
  // says why not through a mapping), each with the few bytes of the next that
  // a call starting at its end needs.
  constexpr uint64_t kChunk = 1 << 20, kLongestCall = 16;
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> code;
  for (const Segment& s : segments) {
    for (uint64_t base = 0; base < s.size; base += kChunk) {
      const uint64_t scanned = std::min(kChunk, s.size - base);
      const uint64_t held = std::min(kChunk + kLongestCall, s.size - base);
      file.read_bytes(s.offset + base, held, code);
      for (uint64_t i = 0; i < scanned; ++i) {
        const uint64_t left = held - i, at = base + i;
        if (code[i] == 0xe8 && left >= 5) {
          int32_t displacement;
          std::memcpy(&displacement, code.data() + i + 1, 4);
          if (executable(s.address + at + 5 + static_cast<int64_t>(displacement))) offsets.push_back(s.offset + at + 5);
        } else if (size_t length = indirect_call_length(code.data() + i, left)) {
          offsets.push_back(s.offset + at + length);
        }
      }
    }
  }
  // An E8 inside an indirect call's bytes may end before or after it.
  std::sort(offsets.begin(), offsets.end());
  offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());
  return offsets;
}

}  // namespace memtrack
