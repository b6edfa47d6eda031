// Decoding events and Module records: the record-type engine
// (record_types.h) drives the reader.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "format/record_codec.h"

namespace memtrack::records {

using namespace codec;

namespace {

// ---- Values: how each type is read ------------------------------------------
//
// Read values are Draft members.

void read_value(Cursor& in, int32_t& v) { v = in.read_int<int32_t>(); }
void read_value(Cursor& in, int64_t& v) { v = in.read_int<int64_t>(); }
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

// ---- The engine: reader, driven by record_types.h -----------------------------

template <typename Part, typename Fields>
void put_fields(Part& part, Draft& draft, DecodeNotes& notes, const Fields& fields) {
  std::apply([&](const auto&... f) { (f.put(part, draft, notes), ...); }, fields);
}

template <typename Part>
void attach(Event& event, std::shared_ptr<Part> part) {
  if constexpr (std::is_same_v<Part, ProcessImage>) event.image = std::move(part);
  if constexpr (std::is_same_v<Part, MappingInfo>) event.mapping = std::move(part);
  if constexpr (std::is_same_v<Part, StackDefinition>) event.stack = std::move(part);
  if constexpr (std::is_same_v<Part, PythonCode>) event.python_code = std::move(part);
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
MEMTRACK_CODEC_FLATTEN void read_draft(Cursor& in, Draft& draft) {
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

RecordOutcome decode_event(Cursor& in, Event& out, DecodeNotes& notes, const KnownTypes& known,
                           ModuleInfo* module, HeapColumns* heap, AggregatePart* aggregate) {
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
  if (draft.type == kHeapName.text()) {
    if (!heap) return RecordOutcome::Skipped;
    *heap = HeapColumns{draft.first_block, draft.first_tick, draft.tick_ns, draft.new_threads, draft.new_sites,
                        draft.kinds, draft.ticks, draft.threads, draft.sites, draft.refs, draft.addresses};
    return RecordOutcome::Heap;
  }
  if (draft.type == kAggregateName.text()) {
    if (!aggregate) return RecordOutcome::Skipped;
    if (draft.parts == 0 || draft.part >= draft.parts)
      throw DecodeError("an Aggregate record's part " + std::to_string(draft.part) + " is not below its parts " +
                        std::to_string(draft.parts));
    *aggregate = AggregatePart{draft.part, draft.parts, draft.state};
    return RecordOutcome::Aggregate;
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

}  // namespace memtrack::records
