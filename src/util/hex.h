// Bytes as lowercase hex text without separators (build ids as tools print
// them, random file names), and back.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memtrack {

std::string hex(std::span<const uint8_t> bytes);

// The bytes of `text`, two hex digits each (either case); a trailing odd
// digit is ignored. Throws std::invalid_argument naming the text when a pair
// is not hex.
std::vector<uint8_t> bytes_of_hex(std::string_view text);

}  // namespace memtrack
