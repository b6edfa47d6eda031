// Python line tables (co_linetable bytes of PythonCode records, read from
// artifacts): any bytes, first line and instruction.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "symbolize/python_lines.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  const uint32_t first_line = input.ConsumeIntegral<uint32_t>();
  const uint32_t instruction = input.ConsumeIntegral<uint32_t>();
  const std::vector<uint8_t> table = input.ConsumeRemainingBytes<uint8_t>();
  memtrack::python_line(table, first_line, instruction);
  return 0;
}
