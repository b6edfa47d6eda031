#include "symbolize/python_lines.h"

namespace memtrack {
namespace {

// The table's entry kinds (bits 3-6 of an entry's first byte).
constexpr int kNoLocation = 15, kLong = 14, kNoColumns = 13, kOneLine0 = 10;

class Entries {
 public:
  explicit Entries(std::span<const uint8_t> table) : table_(table) {}
  bool at_end() const { return at_ >= table_.size(); }
  uint8_t byte(size_t i) const { return at_ + i < table_.size() ? table_[at_ + i] : 0; }
  // An unsigned varint (6 bits a byte, 0x40: more) at the entry's byte `i`;
  // none when it runs past the table or holds more than 32 bits.
  std::optional<uint32_t> varint(size_t i) const {
    uint32_t value = 0;
    for (unsigned shift = 0; shift < 32; shift += 6, ++i) {
      if (at_ + i >= table_.size()) return std::nullopt;
      uint8_t b = table_[at_ + i];
      value |= uint32_t(b & 63) << shift;
      if (!(b & 64)) return value;
    }
    return std::nullopt;
  }
  // To the next entry's first byte (the one with bit 7 set).
  void next() {
    do ++at_;
    while (at_ < table_.size() && !(table_[at_] & 128));
  }

 private:
  std::span<const uint8_t> table_;
  size_t at_ = 0;
};

}  // namespace

std::optional<uint32_t> python_line(std::span<const uint8_t> line_table, uint32_t first_line, uint32_t instruction) {
  if (instruction == 0xffffffffu) return first_line;
  Entries entries(line_table);
  int64_t line = first_line;
  uint64_t start = 0;  // code units
  while (!entries.at_end()) {
    uint8_t head = entries.byte(0);
    if (!(head & 128)) return std::nullopt;  // not an entry's start: damaged
    int kind = (head >> 3) & 15;
    int64_t delta = 0;
    if (kind == kLong || kind == kNoColumns) {
      std::optional<uint32_t> v = entries.varint(1);
      if (!v) return std::nullopt;
      delta = (*v & 1) ? -int64_t(*v >> 1) : int64_t(*v >> 1);
    } else if (kind >= kOneLine0 && kind < kNoColumns) {
      delta = kind - kOneLine0;
    }
    line += delta;
    uint64_t end = start + (head & 7) + 1;
    if (instruction < end) {
      if (kind == kNoLocation || line <= 0 || line > UINT32_MAX) return std::nullopt;
      return static_cast<uint32_t>(line);
    }
    start = end;
    entries.next();
  }
  return std::nullopt;
}

}  // namespace memtrack
