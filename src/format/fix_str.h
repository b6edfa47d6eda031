// A short string stored with its MessagePack fixstr header in front, so the
// hot path writes a record key or type name with a single copy. Internal to
// src/format.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <stdexcept>
#include <string_view>

namespace memtrack::records {

class FixStr {
 public:
  constexpr FixStr() = default;
  constexpr explicit FixStr(std::string_view text) : size_(text.size()) {
    if (text.size() >= 32) throw std::length_error("not a fixstr");
    bytes_[0] = static_cast<char>(0xa0 | text.size());
    std::copy(text.begin(), text.end(), bytes_.begin() + 1);
  }
  constexpr std::string_view text() const { return {bytes_.data() + 1, size_}; }
  // The encoded bytes: header and text.
  constexpr std::string_view encoded() const { return {bytes_.data(), size_ + 1}; }

 private:
  std::array<char, 32> bytes_{};
  size_t size_ = 0;
};

}  // namespace memtrack::records
