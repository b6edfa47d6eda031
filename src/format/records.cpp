#include "format/records.h"

#include <algorithm>
#include <array>
#include <limits>
#include <msgpack.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>
#include <zlib.h>

#include "format/record_types.h"

namespace memtrack::records {

using msgpack_cursor::Cursor;
using msgpack_cursor::DecodeError;
using Packer = msgpack::packer<ByteBuffer>;

namespace {


// Header and trailer keys.
constexpr std::string_view kRecord = "record";
constexpr std::string_view kHeaderRecord = "memtrack-header";
constexpr std::string_view kTrailerRecord = "memtrack-trailer";
constexpr std::string_view kMagic = "magic";
constexpr std::string_view kMagicValue = "memtrack";
constexpr std::string_view kFormatVersion = "format_version";
constexpr std::string_view kFeatures = "features";
constexpr std::string_view kRecorderVersion = "recorder_version";
constexpr std::string_view kCommand = "command";
constexpr std::string_view kHost = "host";
constexpr std::string_view kKernel = "kernel";
constexpr std::string_view kClock = "clock";
constexpr std::string_view kStartMonotonic = "start_monotonic_ns";
constexpr std::string_view kStartRealtime = "start_realtime_ns";
constexpr std::string_view kPageSize = "page_size";
constexpr std::string_view kCounters = "counters";
constexpr std::string_view kEvents = "events";
constexpr std::string_view kFrames = "frames";
constexpr std::string_view kEndMonotonic = "end_monotonic_ns";
constexpr std::string_view kExitStatus = "exit_status";
// Always the last key, its value always a uint32 (0xce and 4 bytes), so the
// checksummed bytes end where this suffix begins.
constexpr std::string_view kChecksumSuffix = "\xa5" "crc32" "\xce";
constexpr size_t kChecksumBytes = kChecksumSuffix.size() + 4;


uint32_t crc32_of(const void* data, size_t size) {
  return static_cast<uint32_t>(::crc32(::crc32(0L, Z_NULL, 0), static_cast<const Bytef*>(data),
                                       static_cast<uInt>(size)));
}

void store_le(uint8_t* out, uint64_t value, int bytes) {
  for (int b = 0; b < bytes; ++b) out[b] = static_cast<uint8_t>(value >> (8 * b));
}

uint64_t load_le64(const uint8_t* bytes) {
  return load_le32(bytes) | uint64_t{load_le32(bytes + 4)} << 32;
}

void pack_str(Packer& packer, std::string_view text) {
  packer.pack_str(static_cast<uint32_t>(text.size()));
  packer.pack_str_body(text.data(), static_cast<uint32_t>(text.size()));
}

void pack_str_array(Packer& packer, const std::vector<std::string>& items) {
  packer.pack_array(static_cast<uint32_t>(items.size()));
  for (const std::string& item : items) pack_str(packer, item);
}

void pack_uint_array(Packer& packer, const std::vector<uint64_t>& items) {
  packer.pack_array(static_cast<uint32_t>(items.size()));
  for (uint64_t item : items) packer.pack_uint64(item);
}

void pack_bin(Packer& packer, const std::vector<uint8_t>& bytes) {
  packer.pack_bin(static_cast<uint32_t>(bytes.size()));
  packer.pack_bin_body(reinterpret_cast<const char*>(bytes.data()),
                       static_cast<uint32_t>(bytes.size()));
}



uint32_t read_u32(Cursor& in) {
  uint64_t value = in.read_uint();
  if (value > std::numeric_limits<uint32_t>::max()) throw DecodeError("integer out of range");
  return static_cast<uint32_t>(value);
}

// Decoded arrays cost more memory than their encoding (a 1-byte empty string
// becomes a std::string of 32 bytes): the element counts are capped so a
// hostile frame cannot make one record take gigabytes. The caps are far
// above anything memtrack writes (argv of 512 bytes, 256-frame chains) and
// above the symbol tables of the largest programs.
constexpr uint32_t kMaxArrayElements = uint32_t{1} << 22;

uint32_t read_bounded_array_header(Cursor& in) {
  uint32_t count = in.read_array_header();
  if (count > kMaxArrayElements) throw DecodeError("an array of " + std::to_string(count) + " elements");
  return count;
}

std::vector<uint64_t> read_uint_array(Cursor& in) {
  uint32_t count = read_bounded_array_header(in);
  std::vector<uint64_t> items;
  // Every element takes at least a byte: a hostile count cannot make this
  // allocate more than the data it claims to describe.
  items.reserve(std::min<size_t>(count, in.remaining()));
  for (uint32_t i = 0; i < count; ++i) items.push_back(in.read_uint());
  return items;
}

std::vector<std::string> read_str_array(Cursor& in) {
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


// ---- Values: how each type is written, bounded and read --------------------
//
// Written values are the record's members (or the computed values of
// record_types.h); read values are Draft members. MessagePack picks the
// smallest encoding of each number.

// MessagePack overheads: a str32, bin32 or array32 header is 5 bytes, a
// uint64 9, an int32 or uint32 5.
constexpr size_t kStrOverhead = 5;
constexpr size_t kUintBytes = 9;
constexpr size_t kInt32Bytes = 5;

// The record's `type` and a Stack's `end` are written pre-encoded.
template <size_t N>
constexpr std::array<FixStr, N> fix_strs(const std::array<std::string_view, N>& texts) {
  std::array<FixStr, N> fixed;
  for (size_t i = 0; i < N; ++i) fixed[i] = FixStr(texts[i]);
  return fixed;
}
constexpr auto kTypeNames = fix_strs(kEventTypeNames);
constexpr auto kEndNames = fix_strs(kStackEndNames);
constexpr FixStr kModuleName("Module");

void write_fix(ByteBuffer& out, const FixStr& text) { out.write(text.encoded().data(), text.encoded().size()); }

class ValueWriter {
 public:
  explicit ValueWriter(ByteBuffer& out) : out_(out), packer_(out) {}
  Packer& packer() { return packer_; }

  void operator()(int32_t v) { packer_.pack_int32(v); }
  void operator()(uint64_t v) { packer_.pack_uint64(v); }
  void operator()(uint32_t v) { packer_.pack_uint32(v); }
  void operator()(bool v) { v ? packer_.pack_true() : packer_.pack_false(); }
  void operator()(const std::string& v) { pack_str(packer_, v); }
  void operator()(const std::vector<uint8_t>& v) { pack_bin(packer_, v); }
  void operator()(const std::vector<uint64_t>& v) { pack_uint_array(packer_, v); }
  void operator()(const std::vector<std::string>& v) { pack_str_array(packer_, v); }
  void operator()(const std::vector<LoadSegment>& segments) {
    packer_.pack_array(static_cast<uint32_t>(segments.size()));
    for (const LoadSegment& s : segments) {
      packer_.pack_array(5);
      packer_.pack_uint64(s.vaddr);
      packer_.pack_uint64(s.offset);
      packer_.pack_uint64(s.filesz);
      packer_.pack_uint64(s.memsz);
      packer_.pack_uint32(s.flags);
    }
  }
  void operator()(TypeName v) { write_fix(out_, kTypeNames[static_cast<size_t>(v.type)]); }
  void operator()(ModuleTypeName) { write_fix(out_, kModuleName); }
  void operator()(StackEndName v) { write_fix(out_, kEndNames[static_cast<size_t>(v.end)]); }
  void operator()(SymbolAddressSteps v) {
    packer_.pack_array(static_cast<uint32_t>(v.symbols->size()));
    uint64_t previous = 0;
    for (const FunctionSymbol& symbol : *v.symbols) {
      packer_.pack_uint64(symbol.address - previous);  // modulo 2^64: any order round-trips
      previous = symbol.address;
    }
  }
  void operator()(SymbolSizes v) {
    packer_.pack_array(static_cast<uint32_t>(v.symbols->size()));
    for (const FunctionSymbol& symbol : *v.symbols) packer_.pack_uint64(symbol.size);
  }
  void operator()(SymbolNames v) {
    packer_.pack_array(static_cast<uint32_t>(v.symbols->size()));
    for (const FunctionSymbol& symbol : *v.symbols) pack_str(packer_, symbol.name);
  }

 private:
  ByteBuffer& out_;
  Packer packer_;
};

// The most bytes a value takes, encoded.
constexpr size_t value_bound(int32_t) { return kInt32Bytes; }
constexpr size_t value_bound(uint64_t) { return kUintBytes; }
constexpr size_t value_bound(uint32_t) { return kInt32Bytes; }
constexpr size_t value_bound(bool) { return 1; }
size_t value_bound(const std::string& v) { return kStrOverhead + v.size(); }
size_t value_bound(const std::vector<uint8_t>& v) { return kStrOverhead + v.size(); }
size_t value_bound(const std::vector<uint64_t>& v) { return kStrOverhead + kUintBytes * v.size(); }
size_t value_bound(const std::vector<std::string>& v) {
  size_t bound = kStrOverhead;
  for (const std::string& item : v) bound += kStrOverhead + item.size();
  return bound;
}
size_t value_bound(const std::vector<LoadSegment>& v) {
  return kStrOverhead + v.size() * (1 + 4 * kUintBytes + kInt32Bytes);
}
constexpr size_t value_bound(TypeName) { return 32; }  // a fixstr
constexpr size_t value_bound(ModuleTypeName) { return 32; }
constexpr size_t value_bound(StackEndName) { return 32; }
size_t value_bound(SymbolAddressSteps v) { return kStrOverhead + kUintBytes * v.symbols->size(); }
size_t value_bound(SymbolSizes v) { return kStrOverhead + kUintBytes * v.symbols->size(); }
size_t value_bound(SymbolNames v) {
  size_t bound = kStrOverhead;
  for (const FunctionSymbol& symbol : *v.symbols) bound += kStrOverhead + symbol.name.size();
  return bound;
}

void read_value(Cursor& in, int32_t& v) { v = in.read_int<int32_t>(); }
void read_value(Cursor& in, uint64_t& v) { v = in.read_uint(); }
void read_value(Cursor& in, uint32_t& v) { v = read_u32(in); }
void read_value(Cursor& in, bool& v) { v = in.read_bool(); }
void read_value(Cursor& in, std::string_view& v) { v = in.read_str(); }
void read_value(Cursor& in, std::span<const uint8_t>& v) { v = in.read_bin(); }
void read_value(Cursor& in, std::vector<uint64_t>& v) { v = read_uint_array(in); }
void read_value(Cursor& in, std::vector<std::string>& v) { v = read_str_array(in); }
void read_value(Cursor& in, std::vector<LoadSegment>& segments) {
  const uint32_t count = in.read_array_header();
  segments.clear();
  for (uint32_t i = 0; i < count; ++i) {
    if (in.read_array_header() != 5) throw DecodeError("a Module load segment is not 5 integers");
    LoadSegment& s = segments.emplace_back();
    s.vaddr = in.read_uint();
    s.offset = in.read_uint();
    s.filesz = in.read_uint();
    s.memsz = in.read_uint();
    s.flags = read_u32(in);
  }
}
template <typename T>
void read_value(Cursor& in, std::optional<T>& v) {
  read_value(in, v.emplace());
}

// ---- The engine: writer, size bound and reader, driven by record_types.h ---

template <typename Part, typename Fields>
uint32_t present_count(const Part& part, const Fields& fields) {
  return std::apply([&](const auto&... f) { return (uint32_t{f.when(part)} + ... + 0u); }, fields);
}

template <typename Part, typename Fields>
void write_fields(ValueWriter& writer, ByteBuffer& out, const Part& part, const Fields& fields) {
  std::apply(
      [&](const auto&... f) {
        (
            [&] {
              if (!f.when(part)) return;
              write_fix(out, f.key.name);
              writer(f.get(part));
            }(),
            ...);
      },
      fields);
}

// A value whose encoding has the same bound whatever it is.
template <typename V>
constexpr bool kFixedBound = std::is_arithmetic_v<V> || std::is_same_v<V, TypeName> ||
                             std::is_same_v<V, ModuleTypeName> || std::is_same_v<V, StackEndName>;

// Keys with values of a fixed bound count whether written or not, so the
// bound of a type without strings or arrays is a constant.
template <typename Part, typename Fields>
size_t fields_bound(const Part& part, const Fields& fields) {
  return std::apply(
      [&](const auto&... f) {
        return ([&] {
          using Value = std::remove_cvref_t<decltype(f.get(part))>;
          const size_t key = 1 + f.key.name.text().size();
          if constexpr (kFixedBound<Value>)
            return key + value_bound(Value{});
          else
            return f.when(part) ? key + value_bound(f.get(part)) : 0;
        }() + ... + size_t{0});
      },
      fields);
}

template <typename Part, typename Fields>
void put_fields(Part& part, Draft& draft, DecodeNotes& notes, const Fields& fields) {
  std::apply([&](const auto&... f) { (f.put(part, draft, notes), ...); }, fields);
}

// An event's part that holds its type's keys; an absent one reads as empty.
template <typename Part>
const Part& part_of(const Event& event) {
  if constexpr (std::is_same_v<Part, Event>) {
    return event;
  } else {
    static const Part kEmpty;
    const std::shared_ptr<const Part>* held = nullptr;
    if constexpr (std::is_same_v<Part, ProcessImage>) held = &event.image;
    if constexpr (std::is_same_v<Part, MappingInfo>) held = &event.mapping;
    if constexpr (std::is_same_v<Part, StackDefinition>) held = &event.stack;
    return *held ? **held : kEmpty;
  }
}

template <typename Part>
void attach(Event& event, std::shared_ptr<Part> part) {
  if constexpr (std::is_same_v<Part, ProcessImage>) event.image = std::move(part);
  if constexpr (std::is_same_v<Part, MappingInfo>) event.mapping = std::move(part);
  if constexpr (std::is_same_v<Part, StackDefinition>) event.stack = std::move(part);
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

[[gnu::flatten]] void pack_event(ValueWriter& writer, ByteBuffer& out, const Event& event) {
  visit_event_type(event.type, [&](const auto& type) {
    using Part = typename std::remove_cvref_t<decltype(type)>::PartType;
    const Part& part = part_of<Part>(event);
    writer.packer().pack_map(present_count(event, kEventHead) + present_count(part, type.fields));
    write_fields(writer, out, event, kEventHead);
    write_fields(writer, out, part, type.fields);
  });
}

// Reads the value of `name` into the Draft when it is a key of kKeys whose
// name has `Length` characters (checked at compile time, so each length
// compares only its own keys).
template <size_t Length, size_t... I>
bool read_key_of_length(std::string_view name, Cursor& value, Draft& draft, std::index_sequence<I...>) {
  return ([&] {
    constexpr const auto& key = std::get<I>(kKeys);
    if constexpr (key.name.text().size() != Length) {
      return false;
    } else {
      if (name != key.name.text()) return false;
      read_value(value, std::remove_cvref_t<decltype(key)>::in(draft));
      return true;
    }
  }() || ...);
}

constexpr size_t kLongestKey = std::apply(
    [](const auto&... key) { return std::max({key.name.text().size()...}); }, kKeys);
static_assert(kLongestKey <= 24, "read_key's switch stops at 24 characters");

// Reads the value of a known key into the Draft; false for other keys (the
// value is not consumed).
bool read_key(std::string_view name, Cursor& value, Draft& draft) {
  constexpr auto keys = std::make_index_sequence<std::tuple_size_v<decltype(kKeys)>>();
  switch (name.size()) {
#define MT_KEYS_OF_LENGTH(n) \
  case n: return read_key_of_length<n>(name, value, draft, keys);
    MT_KEYS_OF_LENGTH(1) MT_KEYS_OF_LENGTH(2) MT_KEYS_OF_LENGTH(3) MT_KEYS_OF_LENGTH(4) MT_KEYS_OF_LENGTH(5)
    MT_KEYS_OF_LENGTH(6) MT_KEYS_OF_LENGTH(7) MT_KEYS_OF_LENGTH(8) MT_KEYS_OF_LENGTH(9) MT_KEYS_OF_LENGTH(10)
    MT_KEYS_OF_LENGTH(11) MT_KEYS_OF_LENGTH(12) MT_KEYS_OF_LENGTH(13) MT_KEYS_OF_LENGTH(14) MT_KEYS_OF_LENGTH(15)
    MT_KEYS_OF_LENGTH(16) MT_KEYS_OF_LENGTH(17) MT_KEYS_OF_LENGTH(18) MT_KEYS_OF_LENGTH(19) MT_KEYS_OF_LENGTH(20)
    MT_KEYS_OF_LENGTH(21) MT_KEYS_OF_LENGTH(22) MT_KEYS_OF_LENGTH(23) MT_KEYS_OF_LENGTH(24)
#undef MT_KEYS_OF_LENGTH
  }
  return false;
}

// Every known key of the map at the cursor into the Draft. Flattened, as
// the hand-written decoder was: the table's small functions all inline.
[[gnu::flatten]] void read_draft(Cursor& in, Draft& draft) {
  for_each_entry(in, [&](std::string_view key, Cursor& value) {
    if (!read_key(key, value, draft)) value.skip_value();
  });
}

}  // namespace

void read_stack_end(StackDefinition& stack, Draft& draft, DecodeNotes& notes) {
  if (!draft.end) {
    // Nothing says a walk was made (the seed's Stack records are raw copies
    // without `end`).
    stack.end = StackEnd::NotWalked;
  } else if (!stack_end_from_name(*draft.end, &stack.end)) {
    // A reason from a newer writer: the walk did not complete for a reason
    // this reader cannot name; the raw copy, if any, still serves.
    stack.end = StackEnd::Unsupported;
    ++notes.unknown_stack_ends;
  }
}

void assemble_symbols(ModuleInfo& module, Draft& draft) {
  const std::vector<uint64_t>& steps = draft.symbol_addresses;
  if (draft.symbol_sizes.size() != steps.size() || draft.symbol_names.size() != steps.size())
    throw DecodeError("Module symbol columns differ in length");
  module.symbols.reserve(steps.size());
  uint64_t address = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    address += steps[i];
    module.symbols.push_back({address, draft.symbol_sizes[i], std::move(draft.symbol_names[i])});
  }
}

void ByteBuffer::grow(size_t extra) {
  size_t wanted = std::max({capacity_ * 2, size_ + extra, size_t{4096}});
  auto bigger = std::make_unique_for_overwrite<char[]>(wanted);
  if (size_ > 0) std::memcpy(bigger.get(), data_.get(), size_);
  data_ = std::move(bigger);
  capacity_ = wanted;
}

void pack_events(std::span<const Event> events, ByteBuffer& out) {
  ValueWriter writer(out);
  for (const Event& event : events) pack_event(writer, out, event);
}

[[gnu::flatten]] size_t packed_size_bound(const Event& event) {
  constexpr size_t kMapHeader = 5;
  return visit_event_type(event.type, [&](const auto& type) {
    using Part = typename std::remove_cvref_t<decltype(type)>::PartType;
    return kMapHeader + fields_bound(event, kEventHead) + fields_bound(part_of<Part>(event), type.fields);
  });
}

void pack_module(const ModuleInfo& module, ByteBuffer& out) {
  ValueWriter writer(out);
  writer.packer().pack_map(present_count(module, kModuleType.fields));
  write_fields(writer, out, module, kModuleType.fields);
}

size_t packed_size_bound(const ModuleInfo& module) {
  constexpr size_t kMapHeader = 5;
  return kMapHeader + fields_bound(module, kModuleType.fields);
}


namespace {

// Wraps a map of `entries` entries (packed by pack_entries) and the crc32
// entry that ends it in a skippable frame.
template <typename PackEntries>
void append_skippable_frame(ByteBuffer& out, uint32_t entries, PackEntries&& pack_entries) {
  ByteBuffer payload;
  Packer packer(payload);
  packer.pack_map(entries + 1);
  pack_entries(packer);
  payload.write(kChecksumSuffix.data(), kChecksumSuffix.size());
  uint32_t crc = crc32_of(payload.data(), payload.size() - kChecksumSuffix.size());
  const char crc_bytes[4] = {static_cast<char>(crc >> 24), static_cast<char>(crc >> 16),
                             static_cast<char>(crc >> 8), static_cast<char>(crc)};
  payload.write(crc_bytes, sizeof crc_bytes);
  uint8_t envelope[kSkippableHeaderBytes];
  store_le(envelope, kSkippableMagic, 4);
  store_le(envelope + 4, payload.size(), 4);
  out.write(reinterpret_cast<const char*>(envelope), sizeof envelope);
  out.write(payload.data(), payload.size());
}

}  // namespace

void append_header_frame(const ArtifactHeader& header, ByteBuffer& out) {
  append_skippable_frame(out, 12, [&](Packer& packer) {
    pack_str(packer, kRecord);
    pack_str(packer, kHeaderRecord);
    pack_str(packer, kMagic);
    pack_str(packer, kMagicValue);
    pack_str(packer, kFormatVersion);
    packer.pack_uint32(header.format_version);
    pack_str(packer, kFeatures);
    pack_str_array(packer, header.features);
    pack_str(packer, kRecorderVersion);
    pack_str(packer, header.recorder_version);
    pack_str(packer, kCommand);
    pack_str_array(packer, header.command);
    pack_str(packer, kHost);
    pack_str(packer, header.host);
    pack_str(packer, kKernel);
    pack_str(packer, header.kernel);
    pack_str(packer, kClock);
    pack_str(packer, header.clock);
    pack_str(packer, kStartMonotonic);
    packer.pack_uint64(header.start_monotonic_ns);
    pack_str(packer, kStartRealtime);
    packer.pack_uint64(header.start_realtime_ns);
    pack_str(packer, kPageSize);
    packer.pack_uint32(header.page_size);
  });
}

void append_trailer_frame(const ArtifactTrailer& trailer, ByteBuffer& out) {
  append_skippable_frame(out, 6, [&](Packer& packer) {
    pack_str(packer, kRecord);
    pack_str(packer, kTrailerRecord);
    pack_str(packer, kCounters);
    packer.pack_map(static_cast<uint32_t>(trailer.counters.size()));
    for (const auto& [name, value] : trailer.counters) {
      pack_str(packer, name);
      packer.pack_uint64(value);
    }
    pack_str(packer, kEvents);
    packer.pack_uint64(trailer.events);
    pack_str(packer, kFrames);
    packer.pack_uint64(trailer.frames);
    pack_str(packer, kEndMonotonic);
    packer.pack_uint64(trailer.end_monotonic_ns);
    pack_str(packer, kExitStatus);
    packer.pack_int32(trailer.exit_status);
  });
}

void write_frame_marker(const FrameMarker& marker, uint8_t (&out)[kFrameMarkerBytes]) {
  store_le(out, kFrameMarkerMagic, 4);
  store_le(out + 4, kFrameMarkerPayloadBytes, 4);
  uint8_t* payload = out + kSkippableHeaderBytes;
  store_le(payload, marker.sequence, 8);
  store_le(payload + 8, marker.frame_bytes, 4);
  store_le(payload + 12, crc32_of(payload, 12), 4);
}

std::optional<FrameMarker> decode_frame_marker(std::span<const uint8_t> payload) {
  if (payload.size() != kFrameMarkerPayloadBytes) return std::nullopt;
  if (load_le32(payload.data() + 12) != crc32_of(payload.data(), 12)) return std::nullopt;
  return FrameMarker{load_le64(payload.data()), load_le32(payload.data() + 8)};
}

ChecksumState verify_payload_checksum(std::span<const uint8_t> payload) {
  if (payload.size() < kChecksumBytes) return ChecksumState::Absent;
  size_t suffix_at = payload.size() - kChecksumBytes;
  if (std::string_view(reinterpret_cast<const char*>(payload.data()) + suffix_at,
                       kChecksumSuffix.size()) != kChecksumSuffix) {
    return ChecksumState::Absent;
  }
  const uint8_t* stored = payload.data() + suffix_at + kChecksumSuffix.size();
  uint32_t crc = uint32_t{stored[0]} << 24 | uint32_t{stored[1]} << 16 | uint32_t{stored[2]} << 8 | stored[3];
  return crc == crc32_of(payload.data(), suffix_at) ? ChecksumState::Valid : ChecksumState::Mismatch;
}

RecordOutcome decode_event(Cursor& in, Event& out, DecodeNotes& notes, const KnownTypes& known,
                           ModuleInfo* module) {
  if (!in.next_is_map()) {
    in.skip_value();
    return RecordOutcome::Skipped;
  }
  // Every known key is read first: `type` may come anywhere in the map, and
  // only the keys that belong to the type are kept.
  Draft draft;
  read_draft(in, draft);
  if (draft.type == kModuleName.text()) {
    if (!module) return RecordOutcome::Skipped;
    *module = ModuleInfo{};
    put_fields(*module, draft, notes, kModuleType.fields);
    return RecordOutcome::Module;
  }
  EventType type;
  if (!event_type_from_name(draft.type, &type) || !known.test(static_cast<size_t>(type)))
    return RecordOutcome::Skipped;
  out = Event{};
  out.type = type;
  put_fields(out, draft, notes, kEventHead);
  visit_event_type(type, [&](const auto& record_type) {
    using Part = typename std::remove_cvref_t<decltype(record_type)>::PartType;
    if constexpr (std::is_same_v<Part, Event>) {
      put_fields(out, draft, notes, record_type.fields);
    } else {
      // Always present on its type's events, so consumers need no null check.
      auto part = std::make_shared<Part>();
      put_fields(*part, draft, notes, record_type.fields);
      attach(out, std::move(part));
    }
  });
  return RecordOutcome::Decoded;
}


SkippableKind classify_skippable(std::span<const uint8_t> payload) {
  Cursor in(payload.data(), payload.data() + payload.size());
  SkippableKind kind = SkippableKind::Unknown;
  try {
    if (!in.next_is_map()) return SkippableKind::Unknown;
    for_each_entry(in, [&](std::string_view key, Cursor& value) {
      if (key == kRecord && value.next_is_str()) {
        std::string_view record = value.read_str();
        if (record == kHeaderRecord) kind = SkippableKind::Header;
        if (record == kTrailerRecord) kind = SkippableKind::Trailer;
        return;
      }
      value.skip_value();
    });
  } catch (const DecodeError&) {
    return SkippableKind::Unknown;  // not MessagePack: some other tool's frame
  }
  return kind;
}

ArtifactHeader decode_header(std::span<const uint8_t> payload) {
  Cursor in(payload.data(), payload.data() + payload.size());
  ArtifactHeader header;
  bool magic_ok = false, has_version = false;
  for_each_entry(in, [&](std::string_view key, Cursor& value) {
    if (key == kMagic) {
      magic_ok = value.read_str() == kMagicValue;
    } else if (key == kFormatVersion) {
      header.format_version = read_u32(value);
      has_version = true;
    } else if (key == kFeatures) {
      header.features = read_str_array(value);
    } else if (key == kRecorderVersion) {
      header.recorder_version = value.read_str();
    } else if (key == kCommand) {
      header.command = read_str_array(value);
    } else if (key == kHost) {
      header.host = value.read_str();
    } else if (key == kKernel) {
      header.kernel = value.read_str();
    } else if (key == kClock) {
      header.clock = value.read_str();
    } else if (key == kStartMonotonic) {
      header.start_monotonic_ns = value.read_uint();
    } else if (key == kStartRealtime) {
      header.start_realtime_ns = value.read_uint();
    } else if (key == kPageSize) {
      header.page_size = read_u32(value);
    } else {
      value.skip_value();  // `record`, or a key from a newer writer
    }
  });
  if (!magic_ok) throw DecodeError("header magic is not \"memtrack\"");
  if (!has_version) throw DecodeError("header has no format_version");
  return header;
}

ArtifactTrailer decode_trailer(std::span<const uint8_t> payload) {
  Cursor in(payload.data(), payload.data() + payload.size());
  ArtifactTrailer trailer;
  for_each_entry(in, [&](std::string_view key, Cursor& value) {
    if (key == kCounters) {
      uint32_t entries = value.read_map_header();
      for (uint32_t i = 0; i < entries; ++i) {
        std::string name(value.read_str());
        trailer.counters[std::move(name)] = value.read_uint();
      }
    } else if (key == kEvents) {
      trailer.events = value.read_uint();
    } else if (key == kFrames) {
      trailer.frames = value.read_uint();
    } else if (key == kEndMonotonic) {
      trailer.end_monotonic_ns = value.read_uint();
    } else if (key == kExitStatus) {
      trailer.exit_status = value.read_int<int32_t>();
    } else {
      value.skip_value();
    }
  });
  return trailer;
}

}  // namespace memtrack::records

