#include "symbolize/python_lines.h"

#include "wire/python_line_table.h"

namespace memtrack {

std::optional<uint32_t> python_line(std::span<const uint8_t> line_table, uint32_t first_line, uint32_t instruction) {
  uint32_t line = mt_python_line(line_table.data(), line_table.size(), first_line, instruction);
  if (line == 0) return std::nullopt;
  return line;
}

}  // namespace memtrack
