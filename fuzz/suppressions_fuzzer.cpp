// LeakSanitizer-style suppression files (`report --suppressions FILE`) and
// their pattern matching.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "analyze/suppressions.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  const std::string pattern = input.ConsumeRandomLengthString(256);
  const std::string name = input.ConsumeRandomLengthString(256);
  memtrack::suppression_pattern_matches(pattern, name);
  try {
    memtrack::Suppressions::from_text(input.ConsumeRemainingBytesAsString(), "fuzz-input");
  } catch (const std::runtime_error&) {
    // Lines that are not leak:PATTERN: refused with the line number.
  }
  return 0;
}
