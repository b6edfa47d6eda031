// Source lines of Python code objects, from their line tables as CPython
// 3.11 writes them: wire/python_line_table.h's decoder, which the
// interposer shares to key call paths by line.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace memtrack {

// The instruction's line: `instruction` is a code unit index (0xffffffff:
// the frame has not started, which CPython reports as the first line). None
// when the table says the instruction has no line, or ends (or is damaged)
// before it.
std::optional<uint32_t> python_line(std::span<const uint8_t> line_table, uint32_t first_line, uint32_t instruction);

}  // namespace memtrack
