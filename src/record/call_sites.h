// The return addresses a module's code can push: the instruction after each
// call, found by a linear sweep of its executable segments. Lets the
// recorder give the kernel's stack walker every rule of a module when it is
// first mapped, so even the first walk through it completes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memtrack {

// File offsets of the instructions that follow a call in the executable
// PT_LOAD segments of the ELF file at `path`, ascending. Throws
// std::runtime_error naming the file if it is not a readable x86-64 ELF.
std::vector<uint64_t> return_address_offsets(const std::string& path);

}  // namespace memtrack
