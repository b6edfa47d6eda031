// Encoding events and Module records, and the bound of their size: the
// record-type engine (record_types.h) drives the writer.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "format/record_codec.h"

namespace memtrack::records {

using namespace codec;

namespace {

// ---- Values: how each type is written and bounded -------------------------
//
// Written values are the record's members (or the computed values of
// record_types.h). MessagePack picks the smallest encoding of each number.

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

// ---- The engine: writer and size bound, driven by record_types.h -----------

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
    if constexpr (std::is_same_v<Part, PythonCode>) held = &event.python_code;
    return *held ? **held : kEmpty;
  }
}

MEMTRACK_CODEC_FLATTEN void pack_event(ValueWriter& writer, ByteBuffer& out, const Event& event) {
  visit_event_type(event.type, [&](const auto& type) {
    using Part = typename std::remove_cvref_t<decltype(type)>::PartType;
    const Part& part = part_of<Part>(event);
    writer.packer().pack_map(present_count(event, kEventHead) + present_count(part, type.fields));
    write_fields(writer, out, event, kEventHead);
    write_fields(writer, out, part, type.fields);
  });
}

}  // namespace

void pack_events(std::span<const Event> events, ByteBuffer& out) {
  ValueWriter writer(out);
  for (const Event& event : events) pack_event(writer, out, event);
}

MEMTRACK_CODEC_FLATTEN size_t packed_size_bound(const Event& event) {
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

void pack_aggregate_part(const AggregatePart& part, ByteBuffer& out) {
  Packer packer(out);
  packer.pack_map(4);
  pack_str(packer, kType.name.text());
  pack_str(packer, kAggregateName.text());
  pack_str(packer, kPart.name.text());
  packer.pack_uint32(part.part);
  pack_str(packer, kParts.name.text());
  packer.pack_uint32(part.parts);
  pack_str(packer, kState.name.text());
  packer.pack_bin(static_cast<uint32_t>(part.state.size()));
  packer.pack_bin_body(reinterpret_cast<const char*>(part.state.data()), static_cast<uint32_t>(part.state.size()));
}

size_t packed_size_bound(const ModuleInfo& module) {
  constexpr size_t kMapHeader = 5;
  return kMapHeader + fields_bound(module, kModuleType.fields);
}

}  // namespace memtrack::records
