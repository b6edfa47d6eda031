// Paths, commands and symbol names are arbitrary bytes; some outputs must be
// UTF-8 (protobuf strings, folded stacks read as text). Each maximal invalid
// subpart becomes one U+FFFD (Unicode's recommended practice, which the JSON
// report's replacement follows too).
#pragma once

#include <string>
#include <string_view>

namespace memtrack {

inline std::string valid_utf8(std::string_view text) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    if (lead < 0x80) {
      out += static_cast<char>(lead);
      ++i;
      continue;
    }
    // The sequence's length and the range of its second byte (the first
    // excludes overlongs, surrogates and code points past U+10FFFF).
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) length = 2;
    else if (lead == 0xE0) length = 3, low = 0xA0;
    else if (lead == 0xED) length = 3, high = 0x9F;
    else if (lead >= 0xE1 && lead <= 0xEF) length = 3;
    else if (lead == 0xF0) length = 4, low = 0x90;
    else if (lead >= 0xF1 && lead <= 0xF3) length = 4;
    else if (lead == 0xF4) length = 4, high = 0x8F;
    size_t valid = length == 0 ? 0 : 1;  // bytes of the sequence checked so far
    while (valid > 0 && valid < length && i + valid < text.size()) {
      const auto next = static_cast<unsigned char>(text[i + valid]);
      if (next < low || next > high) break;
      ++valid;
      low = 0x80, high = 0xBF;
    }
    if (length > 0 && valid == length) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out += kReplacement;
      i += valid == 0 ? 1 : valid;
    }
  }
  return out;
}

}  // namespace memtrack
