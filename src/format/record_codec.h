// The MessagePack helpers and the record-type engine shared by the sources
// of src/format that encode and decode records: records.cpp (header,
// trailer, envelope), record_pack.cpp (events and Module records, their size
// bound) and record_decode.cpp (the record reader). They are separate
// sources so that no single one is slow to compile (docs/benchmarks-history.md, "CI
// time"). Internal to src/format.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <msgpack/pack.hpp>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "format/fix_str.h"
#include "format/msgpack_cursor.h"
#include "format/record_types.h"
#include "format/records.h"

// The engine's entry points are flattened (their small table functions all
// inline, as in the hand-written codec they replaced), except under the
// sanitizers: instrumenting the flattened code made one source take more
// than 9 CPU-minutes and 1.3 GB to compile, and speed does not matter there.
#if defined(__SANITIZE_ADDRESS__)
#define MEMTRACK_CODEC_FLATTEN
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MEMTRACK_CODEC_FLATTEN
#endif
#endif
#ifndef MEMTRACK_CODEC_FLATTEN
#define MEMTRACK_CODEC_FLATTEN [[gnu::flatten]]
#endif

namespace memtrack::records::codec {

using msgpack_cursor::Cursor;
using msgpack_cursor::DecodeError;
using Packer = msgpack::packer<ByteBuffer>;

inline constexpr FixStr kModuleName("Module");

inline void pack_str(Packer& packer, std::string_view text) {
  packer.pack_str(static_cast<uint32_t>(text.size()));
  packer.pack_str_body(text.data(), static_cast<uint32_t>(text.size()));
}

inline void pack_str_array(Packer& packer, const std::vector<std::string>& items) {
  packer.pack_array(static_cast<uint32_t>(items.size()));
  for (const std::string& item : items) pack_str(packer, item);
}

inline void pack_uint_array(Packer& packer, const std::vector<uint64_t>& items) {
  packer.pack_array(static_cast<uint32_t>(items.size()));
  for (uint64_t item : items) packer.pack_uint64(item);
}

inline void pack_bin(Packer& packer, const std::vector<uint8_t>& bytes) {
  packer.pack_bin(static_cast<uint32_t>(bytes.size()));
  packer.pack_bin_body(reinterpret_cast<const char*>(bytes.data()),
                       static_cast<uint32_t>(bytes.size()));
}

inline uint32_t read_u32(Cursor& in) {
  uint64_t value = in.read_uint();
  if (value > std::numeric_limits<uint32_t>::max()) throw DecodeError("integer out of range");
  return static_cast<uint32_t>(value);
}

// Decoded arrays cost more memory than their encoding (a 1-byte empty string
// becomes a std::string of 32 bytes): the element counts are capped so a
// hostile frame cannot make one record take gigabytes. The caps are far
// above anything memtrack writes (argv of 512 bytes, 256-frame chains) and
// above the symbol tables of the largest programs.
inline constexpr uint32_t kMaxArrayElements = uint32_t{1} << 22;

inline uint32_t read_bounded_array_header(Cursor& in) {
  uint32_t count = in.read_array_header();
  if (count > kMaxArrayElements) throw DecodeError("an array of " + std::to_string(count) + " elements");
  return count;
}

inline std::vector<uint64_t> read_uint_array(Cursor& in) {
  uint32_t count = read_bounded_array_header(in);
  std::vector<uint64_t> items;
  // Every element takes at least a byte: a hostile count cannot make this
  // allocate more than the data it claims to describe.
  items.reserve(std::min<size_t>(count, in.remaining()));
  for (uint32_t i = 0; i < count; ++i) items.push_back(in.read_uint());
  return items;
}

inline std::vector<std::string> read_str_array(Cursor& in) {
  uint32_t count = read_bounded_array_header(in);
  std::vector<std::string> items;
  // Not reserve(count): a hostile count must not allocate before the
  // strings are actually found in the data.
  for (uint32_t i = 0; i < count; ++i) items.emplace_back(in.read_str());
  return items;
}

// Calls on_entry(key, cursor) for every string-keyed entry of the map at the
// cursor (which must consume the value); entries with other keys are skipped.
template <typename OnEntry>
void for_each_entry(Cursor& in, OnEntry&& on_entry) {
  uint32_t entries = in.read_map_header();
  for (uint32_t i = 0; i < entries; ++i) {
    if (!in.next_is_str()) {
      in.skip_value();
      in.skip_value();
      continue;
    }
    on_entry(in.read_str(), in);
  }
}

// Calls visit(kEventTypes' entry of `type`).
template <typename Visit, size_t... I>
decltype(auto) visit_event_type(EventType type, Visit&& visit, std::index_sequence<I...>) {
  using Result = decltype(visit(std::get<0>(kEventTypes)));
  if constexpr (std::is_void_v<Result>) {
    (void)((static_cast<size_t>(type) == I && (visit(std::get<I>(kEventTypes)), true)) || ...);
  } else {
    Result result{};
    (void)((static_cast<size_t>(type) == I && (result = visit(std::get<I>(kEventTypes)), true)) || ...);
    return result;
  }
}
template <typename Visit>
decltype(auto) visit_event_type(EventType type, Visit&& visit) {
  return visit_event_type(type, std::forward<Visit>(visit), std::make_index_sequence<kEventTypeCount>());
}

}  // namespace memtrack::records::codec
