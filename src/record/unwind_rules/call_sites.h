// The return addresses a module's code can push: the end of each call
// instruction. Lets the recorder give the kernel's stack walker every rule of
// a module when it is first mapped, so even the first walk through it
// completes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memtrack {

// File offsets, ascending, of the end of every byte sequence in the
// executable PT_LOAD segments of the ELF file at `path` that decodes as a
// call from its opcode byte on: `call rel32` reaching an executable segment,
// `call r/m64`. A superset of the return addresses the code can push (every
// call, whatever its prefixes, and a few byte sequences inside other
// instructions or data); an extra offset costs a rule nobody looks up, never
// a wrong one (a rule depends on the offset alone). A byte scan rather than a
// disassembly: ~100x faster, and a sweep can lose sync in data and miss a
// call. Throws std::runtime_error naming the file if it is not a readable
// x86-64 ELF.
std::vector<uint64_t> return_address_offsets(const std::string& path);

}  // namespace memtrack
