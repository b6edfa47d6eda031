// A bounds-checked MessagePack reader over a byte range. The artifact reader
// walks records with it instead of building msgpack object trees: it is
// faster, allocates nothing, and skips unknown values without recursion (so
// hostile nesting cannot overflow the stack).
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <stdexcept>
#include <string_view>

namespace memtrack::msgpack_cursor {

// Malformed or out-of-range MessagePack. The artifact reader turns it into a
// "corrupt frame" error.
class DecodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Cursor {
 public:
  Cursor(const uint8_t* begin, const uint8_t* end) : pos_(begin), end_(end) {}

  bool at_end() const { return pos_ == end_; }
  const uint8_t* position() const { return pos_; }
  // Bytes left: an upper bound on the elements an array can really hold, so
  // callers can reserve without trusting a hostile count.
  size_t remaining() const { return static_cast<size_t>(end_ - pos_); }

  bool next_is_map() const {
    need(1);
    uint8_t tag = *pos_;
    return (tag >= 0x80 && tag <= 0x8f) || tag == 0xde || tag == 0xdf;
  }
  bool next_is_str() const {
    need(1);
    uint8_t tag = *pos_;
    return (tag >= 0xa0 && tag <= 0xbf) || (tag >= 0xd9 && tag <= 0xdb);
  }

  uint32_t read_map_header() {
    uint8_t tag = take();
    if (tag >= 0x80 && tag <= 0x8f) return tag & 0x0f;
    if (tag == 0xde) return take_be<uint16_t>();
    if (tag == 0xdf) return take_be<uint32_t>();
    throw DecodeError("expected a map");
  }

  uint32_t read_array_header() {
    uint8_t tag = take();
    if (tag >= 0x90 && tag <= 0x9f) return tag & 0x0f;
    if (tag == 0xdc) return take_be<uint16_t>();
    if (tag == 0xdd) return take_be<uint32_t>();
    throw DecodeError("expected an array");
  }

  // The view points into the underlying bytes.
  std::string_view read_str() {
    uint8_t tag = take();
    uint32_t length;
    if (tag >= 0xa0 && tag <= 0xbf) {
      length = tag & 0x1f;
    } else if (tag == 0xd9) {
      length = take();
    } else if (tag == 0xda) {
      length = take_be<uint16_t>();
    } else if (tag == 0xdb) {
      length = take_be<uint32_t>();
    } else {
      throw DecodeError("expected a string");
    }
    need(length);
    std::string_view text(reinterpret_cast<const char*>(pos_), length);
    pos_ += length;
    return text;
  }

  // The view points into the underlying bytes.
  std::span<const uint8_t> read_bin() {
    uint8_t tag = take();
    uint32_t length;
    if (tag == 0xc4) {
      length = take();
    } else if (tag == 0xc5) {
      length = take_be<uint16_t>();
    } else if (tag == 0xc6) {
      length = take_be<uint32_t>();
    } else {
      throw DecodeError("expected a binary string");
    }
    need(length);
    std::span<const uint8_t> bytes(pos_, length);
    pos_ += length;
    return bytes;
  }

  bool read_bool() {
    uint8_t tag = take();
    if (tag == 0xc2) return false;
    if (tag == 0xc3) return true;
    throw DecodeError("expected a boolean");
  }

  // Any integer encoding whose value is in [0, 2^64).
  uint64_t read_uint() {
    uint8_t tag = take();
    if (tag <= 0x7f) return tag;
    switch (tag) {
      case 0xcc: return take();
      case 0xcd: return take_be<uint16_t>();
      case 0xce: return take_be<uint32_t>();
      case 0xcf: return take_be<uint64_t>();
      case 0xd0: return non_negative(static_cast<int8_t>(take()));
      case 0xd1: return non_negative(static_cast<int16_t>(take_be<uint16_t>()));
      case 0xd2: return non_negative(static_cast<int32_t>(take_be<uint32_t>()));
      case 0xd3: return non_negative(static_cast<int64_t>(take_be<uint64_t>()));
      default: throw DecodeError("expected an unsigned integer");
    }
  }

  // Any integer encoding whose value fits in T.
  template <typename T>
  T read_int() {
    uint8_t tag = take();
    int64_t value;
    if (tag <= 0x7f) return static_cast<T>(tag);
    if (tag >= 0xe0) return static_cast<T>(static_cast<int8_t>(tag));
    switch (tag) {
      case 0xcc: value = take(); break;
      case 0xcd: value = take_be<uint16_t>(); break;
      case 0xce: value = take_be<uint32_t>(); break;
      case 0xcf: {
        uint64_t big = take_be<uint64_t>();
        if (big > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          throw DecodeError("integer out of range");
        value = static_cast<int64_t>(big);
        break;
      }
      case 0xd0: value = static_cast<int8_t>(take()); break;
      case 0xd1: value = static_cast<int16_t>(take_be<uint16_t>()); break;
      case 0xd2: value = static_cast<int32_t>(take_be<uint32_t>()); break;
      case 0xd3: value = static_cast<int64_t>(take_be<uint64_t>()); break;
      default: throw DecodeError("expected an integer");
    }
    if (value < std::numeric_limits<T>::min() || value > std::numeric_limits<T>::max())
      throw DecodeError("integer out of range");
    return static_cast<T>(value);
  }

  // Skips one complete value of any type. Iterative: containers only add to
  // the count of values still to skip.
  void skip_value() {
    uint64_t pending = 1;
    while (pending > 0) {
      --pending;
      uint8_t tag = take();
      if (tag <= 0x7f || tag >= 0xe0 || tag == 0xc0 || tag == 0xc2 || tag == 0xc3) continue;
      if (tag <= 0x8f) {  // fixmap
        pending += 2u * (tag & 0x0f);
      } else if (tag <= 0x9f) {  // fixarray
        pending += tag & 0x0f;
      } else if (tag <= 0xbf) {  // fixstr
        advance(tag & 0x1f);
      } else {
        switch (tag) {
          case 0xc4:
          case 0xd9: advance(take()); break;  // bin8, str8
          case 0xc5:
          case 0xda: advance(take_be<uint16_t>()); break;  // bin16, str16
          case 0xc6:
          case 0xdb: advance(take_be<uint32_t>()); break;              // bin32, str32
          case 0xc7: advance(1 + static_cast<size_t>(take())); break;  // ext8
          case 0xc8: advance(1 + static_cast<size_t>(take_be<uint16_t>())); break;
          case 0xc9: advance(1 + static_cast<size_t>(take_be<uint32_t>())); break;
          case 0xca: advance(4); break;  // float32
          case 0xcb: advance(8); break;  // float64
          case 0xcc:
          case 0xd0: advance(1); break;
          case 0xcd:
          case 0xd1: advance(2); break;
          case 0xce:
          case 0xd2: advance(4); break;
          case 0xcf:
          case 0xd3: advance(8); break;
          case 0xd4: advance(2); break;  // fixext1: type + data
          case 0xd5: advance(3); break;
          case 0xd6: advance(5); break;
          case 0xd7: advance(9); break;
          case 0xd8: advance(17); break;
          case 0xdc: pending += take_be<uint16_t>(); break;
          case 0xdd: pending += take_be<uint32_t>(); break;
          case 0xde: pending += 2ull * take_be<uint16_t>(); break;
          case 0xdf: pending += 2ull * take_be<uint32_t>(); break;
          default: throw DecodeError("invalid MessagePack tag");  // 0xc1
        }
      }
    }
  }

 private:
  void need(size_t count) const {
    if (static_cast<size_t>(end_ - pos_) < count) throw DecodeError("record cut short");
  }
  void advance(size_t count) {
    need(count);
    pos_ += count;
  }
  uint8_t take() {
    need(1);
    return *pos_++;
  }
  template <typename T>
  T take_be() {
    need(sizeof(T));
    T value;
    std::memcpy(&value, pos_, sizeof(T));
    pos_ += sizeof(T);
    if constexpr (sizeof(T) == 2) return __builtin_bswap16(value);
    if constexpr (sizeof(T) == 4) return __builtin_bswap32(value);
    if constexpr (sizeof(T) == 8) return __builtin_bswap64(value);
  }
  static uint64_t non_negative(int64_t value) {
    if (value < 0) throw DecodeError("negative value for an unsigned field");
    return static_cast<uint64_t>(value);
  }

  const uint8_t* pos_;
  const uint8_t* end_;
};

}  // namespace memtrack::msgpack_cursor
