#include "format/records.h"

#include <algorithm>
#include <array>
#include <limits>
#include <msgpack.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>
#include <zlib.h>

namespace memtrack::records {

using msgpack_cursor::Cursor;
using msgpack_cursor::DecodeError;
using Packer = msgpack::packer<ByteBuffer>;

namespace {

// A short string stored with its MessagePack fixstr header in front, so the
// hot path writes an event key or type name with a single copy.
class FixStr {
 public:
  constexpr FixStr() = default;
  constexpr explicit FixStr(std::string_view text) : size_(text.size()) {
    if (text.size() >= 32) throw std::length_error("not a fixstr");
    bytes_[0] = static_cast<char>(0xa0 | text.size());
    std::copy(text.begin(), text.end(), bytes_.begin() + 1);
  }
  constexpr std::string_view text() const { return {bytes_.data() + 1, size_}; }
  void write_to(ByteBuffer& out) const { out.write(bytes_.data(), size_ + 1); }

 private:
  std::array<char, 32> bytes_{};
  size_t size_ = 0;
};

// Event keys, seed-compatible.
constexpr FixStr kPid("pid");
constexpr FixStr kTid("tid");
constexpr FixStr kTimestamp("timestamp");
constexpr FixStr kAddr("addr");
constexpr FixStr kType("type");
constexpr FixStr kSize("size");
constexpr FixStr kOldAddr("old_addr");
constexpr FixStr kParentPid("parent_pid");
constexpr FixStr kExitCode("exit_code");
constexpr FixStr kPath("path");
constexpr FixStr kComm("comm");
constexpr FixStr kArgv("argv");
constexpr FixStr kDev("dev");
constexpr FixStr kIno("ino");
constexpr FixStr kFileOffset("file_offset");
constexpr FixStr kLen("len");
constexpr FixStr kBuildId("build_id");
constexpr FixStr kProt("prot");
constexpr FixStr kNewImage("new_image");
constexpr FixStr kStackHash("stack_hash");
constexpr FixStr kHash("hash");
constexpr FixStr kChain("chain");
constexpr FixStr kEnd("end");
constexpr FixStr kMissPc("miss_pc");
constexpr FixStr kSp("sp");
constexpr FixStr kRegs("regs");
constexpr FixStr kBytes("bytes");
constexpr FixStr kTruncated("truncated");
constexpr FixStr kFpChain("fp_chain");
constexpr FixStr kMember("member");
constexpr FixStr kOldSize("old_size");

// Module records: the type, then their own keys (none shares a name with an
// event key of another type, so older readers skip them without error).
constexpr FixStr kModuleType("Module");
constexpr FixStr kSegments("segments");
constexpr FixStr kSymbolAddresses("symbol_addresses");
constexpr FixStr kSymbolSizes("symbol_sizes");
constexpr FixStr kSymbolNames("symbol_names");
constexpr FixStr kEhFrame("eh_frame");
constexpr FixStr kEhFrameAddress("eh_frame_address");
constexpr FixStr kEhFrameHdr("eh_frame_hdr");
constexpr FixStr kEhFrameHdrAddress("eh_frame_hdr_address");
constexpr FixStr kDebugFrame("debug_frame");
constexpr FixStr kDebugLink("debug_link");
constexpr FixStr kDebugLinkCrc("debug_link_crc");
constexpr FixStr kDebugFile("debug_file");

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

// MessagePack overheads: a str32, bin32 or array32 header is 5 bytes, a
// uint64 9.
constexpr size_t kStrOverhead = 5;
constexpr size_t kUintBytes = 9;

// A Mapping event without its MappingInfo is written as an empty one.
const MappingInfo& mapping_of(const Event& event) {
  static const MappingInfo kEmpty;
  return event.type == EventType::Mapping && event.mapping ? *event.mapping : kEmpty;
}

// Likewise a Stack event without its StackDefinition.
const StackDefinition& stack_of(const Event& event) {
  static const StackDefinition kEmpty;
  return event.type == EventType::Stack && event.stack ? *event.stack : kEmpty;
}

// The raw copy's keys (sp, regs, bytes, truncated) go together: written
// only when there are bytes to unwind from.
bool has_raw_copy(const StackDefinition& stack) { return !stack.bytes.empty(); }

// Packs events into one buffer: keys and type names are copied pre-encoded,
// numbers and maps go through msgpack-cxx's packer (smallest encodings).
class EventPacker {
 public:
  explicit EventPacker(ByteBuffer& out) : out_(out), packer_(out) {
    for (int i = 0; i < kEventTypeCount; ++i) {
      type_names_[i] = FixStr(event_type_name(static_cast<EventType>(i)));
    }
    for (int i = 0; i < kStackEndCount; ++i) {
      end_names_[i] = FixStr(stack_end_name(static_cast<StackEnd>(i)));
    }
  }

  void pack(const Event& event) {
    const ProcessImage* image = event.type == EventType::Exec ? event.image.get() : nullptr;
    const MappingInfo& mapping = mapping_of(event);
    const StackDefinition& stack = stack_of(event);
    uint32_t entries = 5;
    switch (event.type) {
      case EventType::Malloc:
      case EventType::Calloc:
      case EventType::AlignedAlloc: entries += 1 + (event.stack_hash != 0); break;
      case EventType::Fork:
      case EventType::Exit: entries += 1; break;
      case EventType::Realloc:
        entries += 1 + (event.old_addr != 0) + (event.stack_hash != 0);
        break;
      case EventType::Free: break;
      case EventType::Exec:
        if (image) entries += !image->path.empty() + !image->comm.empty() + !image->argv.empty();
        break;
      case EventType::Mapping:
        entries += 6 + !mapping.build_id.empty() + mapping.new_image;
        break;
      case EventType::Rss: entries += 2; break;
      case EventType::Mmap:
      case EventType::Munmap: entries += 1; break;
      case EventType::Mremap: entries += 3; break;
      case EventType::Brk: entries += 1; break;
      case EventType::Stack:
        entries += 2 + !stack.chain.empty() + (stack.miss_pc != 0) +
                   (4 + !stack.fp_chain.empty()) * has_raw_copy(stack);
        break;
    }
    packer_.pack_map(entries);
    kPid.write_to(out_);
    packer_.pack_int32(event.pid);
    kTid.write_to(out_);
    packer_.pack_int32(event.tid);
    kTimestamp.write_to(out_);
    packer_.pack_uint64(event.timestamp);
    kAddr.write_to(out_);
    packer_.pack_uint64(event.addr);
    kType.write_to(out_);
    type_names_[static_cast<size_t>(event.type)].write_to(out_);
    switch (event.type) {
      case EventType::Malloc:
      case EventType::Calloc:
      case EventType::AlignedAlloc:
        kSize.write_to(out_);
        packer_.pack_uint64(event.size);
        pack_stack_hash(event.stack_hash);
        break;
      case EventType::Realloc:
        // Omitted for realloc(NULL, n), as the seed does, so those records
        // stay byte-identical to its older Realloc.
        if (event.old_addr != 0) {
          kOldAddr.write_to(out_);
          packer_.pack_uint64(event.old_addr);
        }
        kSize.write_to(out_);
        packer_.pack_uint64(event.size);
        pack_stack_hash(event.stack_hash);
        break;
      case EventType::Free: break;
      case EventType::Fork:
        kParentPid.write_to(out_);
        packer_.pack_int32(event.parent_pid);
        break;
      case EventType::Exec:
        if (image && !image->path.empty()) {
          kPath.write_to(out_);
          pack_str(packer_, image->path);
        }
        if (image && !image->comm.empty()) {
          kComm.write_to(out_);
          pack_str(packer_, image->comm);
        }
        if (image && !image->argv.empty()) {
          kArgv.write_to(out_);
          pack_str_array(packer_, image->argv);
        }
        break;
      case EventType::Exit:
        kExitCode.write_to(out_);
        packer_.pack_int32(event.exit_code);
        break;
      case EventType::Mapping:
        // The seed's keys first, always present (its reader expects them).
        kPath.write_to(out_);
        pack_str(packer_, mapping.path);
        kDev.write_to(out_);
        packer_.pack_uint64(mapping.dev);
        kIno.write_to(out_);
        packer_.pack_uint64(mapping.ino);
        kFileOffset.write_to(out_);
        packer_.pack_uint64(mapping.file_offset);
        kLen.write_to(out_);
        packer_.pack_uint64(mapping.len);
        if (!mapping.build_id.empty()) {
          kBuildId.write_to(out_);
          pack_bin(packer_, mapping.build_id);
        }
        kProt.write_to(out_);
        packer_.pack_uint32(mapping.prot);
        if (mapping.new_image) {
          kNewImage.write_to(out_);
          packer_.pack_true();
        }
        break;
      case EventType::Stack: pack_stack(stack); break;
      case EventType::Rss:
        // The seed's Rss keys: `member` (the kernel's counter) and `size`.
        kMember.write_to(out_);
        packer_.pack_int32(event.member);
        kSize.write_to(out_);
        packer_.pack_uint64(event.size);
        break;
      case EventType::Mremap:
        kOldAddr.write_to(out_);
        packer_.pack_uint64(event.old_addr);
        kOldSize.write_to(out_);
        packer_.pack_uint64(event.old_size);
        [[fallthrough]];
      case EventType::Mmap:
      case EventType::Munmap:
        kSize.write_to(out_);
        packer_.pack_uint64(event.size);
        break;
      case EventType::Brk:
        kOldAddr.write_to(out_);
        packer_.pack_uint64(event.old_addr);
        break;
    }
  }

 private:
  // Omitted when 0 (no stack captured), as the seed does: records without a
  // stack are byte-identical to those of a writer that predates stacks.
  void pack_stack_hash(uint64_t stack_hash) {
    if (stack_hash == 0) return;
    kStackHash.write_to(out_);
    packer_.pack_uint64(stack_hash);
  }

  void pack_stack(const StackDefinition& stack) {
    kHash.write_to(out_);
    packer_.pack_uint64(stack.hash);
    if (!stack.chain.empty()) {
      kChain.write_to(out_);
      pack_uint_array(packer_, stack.chain);
    }
    kEnd.write_to(out_);
    end_names_[static_cast<size_t>(stack.end)].write_to(out_);
    if (stack.miss_pc != 0) {
      kMissPc.write_to(out_);
      packer_.pack_uint64(stack.miss_pc);
    }
    if (!has_raw_copy(stack)) return;
    // The seed's keys and types.
    kSp.write_to(out_);
    packer_.pack_uint64(stack.sp);
    kRegs.write_to(out_);
    pack_uint_array(packer_, stack.regs);
    kBytes.write_to(out_);
    pack_bin(packer_, stack.bytes);
    kTruncated.write_to(out_);
    if (stack.truncated) {
      packer_.pack_true();
    } else {
      packer_.pack_false();
    }
    if (!stack.fp_chain.empty()) {
      kFpChain.write_to(out_);
      pack_uint_array(packer_, stack.fp_chain);
    }
  }

  ByteBuffer& out_;
  Packer packer_;
  std::array<FixStr, kEventTypeCount> type_names_;
  std::array<FixStr, kStackEndCount> end_names_;
};

uint32_t read_u32(Cursor& in) {
  uint64_t value = in.read_uint();
  if (value > std::numeric_limits<uint32_t>::max()) throw DecodeError("integer out of range");
  return static_cast<uint32_t>(value);
}

std::vector<uint8_t> read_bin(Cursor& in) {
  std::span<const uint8_t> bytes = in.read_bin();
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
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

}  // namespace

void ByteBuffer::grow(size_t extra) {
  size_t wanted = std::max({capacity_ * 2, size_ + extra, size_t{4096}});
  auto bigger = std::make_unique_for_overwrite<char[]>(wanted);
  if (size_ > 0) std::memcpy(bigger.get(), data_.get(), size_);
  data_ = std::move(bigger);
  capacity_ = wanted;
}

void pack_events(std::span<const Event> events, ByteBuffer& out) {
  EventPacker packer(out);
  for (const Event& event : events) packer.pack(event);
}

size_t packed_size_bound(const Event& event) {
  // Map header plus every fixed key and integer value at its widest encoding
  // (the widest record, a Realloc with old_addr and stack_hash, needs 117).
  constexpr size_t kFixedPart = 128;
  if (event.type == EventType::Stack) {
    const StackDefinition& stack = stack_of(event);
    // 9 keys of at most 9 characters, 3 integers, `end` (at most 11
    // characters), a bool, and the headers of the three arrays and the bin.
    constexpr size_t kStackFixedPart = 9 * 10 + 3 * kUintBytes + 12 + 1 + 4 * kStrOverhead;
    return kFixedPart + kStackFixedPart +
           kUintBytes * (stack.chain.size() + stack.regs.size() + stack.fp_chain.size()) + stack.bytes.size();
  }
  if (event.type == EventType::Mapping) {
    const MappingInfo& mapping = mapping_of(event);
    // 8 keys of at most 11 characters, 6 integers of at most 9 bytes, a
    // bool, and the headers of the path and the build id.
    constexpr size_t kMappingFixedPart = 8 * 12 + 6 * kUintBytes + 1 + 2 * kStrOverhead;
    return kFixedPart + kMappingFixedPart + mapping.path.size() + mapping.build_id.size();
  }
  if (event.type != EventType::Exec || !event.image) return kFixedPart;
  const ProcessImage& image = *event.image;
  size_t bound = kFixedPart + 3 * (kStrOverhead + 8);  // the three keys
  bound += kStrOverhead + image.path.size() + kStrOverhead + image.comm.size();
  bound += kStrOverhead;  // argv array header
  for (const std::string& arg : image.argv) bound += kStrOverhead + arg.size();
  return bound;
}

void pack_module(const ModuleInfo& module, ByteBuffer& out) {
  Packer packer(out);
  auto pack_bytes = [&](std::span<const uint8_t> bytes) {
    packer.pack_bin(static_cast<uint32_t>(bytes.size()));
    packer.pack_bin_body(reinterpret_cast<const char*>(bytes.data()), static_cast<uint32_t>(bytes.size()));
  };
  const bool by_inode = module.dev != 0 || module.ino != 0;
  const SectionBytes* sections[] = {module.eh_frame ? &*module.eh_frame : nullptr,
                                    module.eh_frame_hdr ? &*module.eh_frame_hdr : nullptr,
                                    module.debug_frame ? &*module.debug_frame : nullptr};
  const uint32_t entries = 6 + !module.build_id.empty() + 2 * by_inode + 2 * (sections[0] != nullptr) +
                           2 * (sections[1] != nullptr) + (sections[2] != nullptr) +
                           2 * module.debug_link.has_value() + !module.debug_file.empty();
  packer.pack_map(entries);
  kType.write_to(out);
  kModuleType.write_to(out);
  kPath.write_to(out);
  pack_str(packer, module.path);
  if (!module.build_id.empty()) {
    kBuildId.write_to(out);
    pack_bin(packer, module.build_id);
  }
  if (by_inode) {
    kDev.write_to(out);
    packer.pack_uint64(module.dev);
    kIno.write_to(out);
    packer.pack_uint64(module.ino);
  }
  kSegments.write_to(out);
  packer.pack_array(static_cast<uint32_t>(module.load_segments.size()));
  for (const LoadSegment& s : module.load_segments) {
    packer.pack_array(5);
    packer.pack_uint64(s.vaddr);
    packer.pack_uint64(s.offset);
    packer.pack_uint64(s.filesz);
    packer.pack_uint64(s.memsz);
    packer.pack_uint32(s.flags);
  }
  // Three columns rather than one array per symbol: each column is uniform,
  // which zstd compresses better, and the addresses, sorted, are written as
  // differences from the previous one (1-3 bytes instead of 5).
  const auto count = static_cast<uint32_t>(module.symbols.size());
  kSymbolAddresses.write_to(out);
  packer.pack_array(count);
  uint64_t previous = 0;
  for (const FunctionSymbol& symbol : module.symbols) {
    packer.pack_uint64(symbol.address - previous);  // modulo 2^64: any order round-trips
    previous = symbol.address;
  }
  kSymbolSizes.write_to(out);
  packer.pack_array(count);
  for (const FunctionSymbol& symbol : module.symbols) packer.pack_uint64(symbol.size);
  kSymbolNames.write_to(out);
  packer.pack_array(count);
  for (const FunctionSymbol& symbol : module.symbols) pack_str(packer, symbol.name);
  if (sections[0]) {
    kEhFrame.write_to(out);
    pack_bytes(sections[0]->bytes);
    kEhFrameAddress.write_to(out);
    packer.pack_uint64(sections[0]->address);
  }
  if (sections[1]) {
    kEhFrameHdr.write_to(out);
    pack_bytes(sections[1]->bytes);
    kEhFrameHdrAddress.write_to(out);
    packer.pack_uint64(sections[1]->address);
  }
  if (sections[2]) {  // not loaded: no address
    kDebugFrame.write_to(out);
    pack_bytes(sections[2]->bytes);
  }
  if (module.debug_link) {
    kDebugLink.write_to(out);
    pack_str(packer, module.debug_link->name);
    kDebugLinkCrc.write_to(out);
    packer.pack_uint32(module.debug_link->crc);
  }
  if (!module.debug_file.empty()) {
    kDebugFile.write_to(out);
    pack_str(packer, module.debug_file);
  }
}

size_t packed_size_bound(const ModuleInfo& module) {
  // 17 keys of at most 21 bytes, the scalars at their widest, headers.
  constexpr size_t kFixedPart = 17 * 21 + 10 * kUintBytes + 10 * kStrOverhead;
  size_t bound = kFixedPart + module.path.size() + module.build_id.size() + module.debug_file.size();
  bound += module.load_segments.size() * (1 + 5 * kUintBytes);
  for (const FunctionSymbol& symbol : module.symbols) bound += 2 * kUintBytes + kStrOverhead + symbol.name.size();
  for (const auto* section : {&module.eh_frame, &module.eh_frame_hdr, &module.debug_frame})
    if (*section) bound += (*section)->bytes.size();
  if (module.debug_link) bound += module.debug_link->name.size();
  return bound;
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

namespace {

void decode_module(Cursor& in, ModuleInfo& out) {
  out = ModuleInfo{};
  std::vector<uint64_t> address_steps, sizes;
  std::vector<std::string> names;
  std::optional<uint64_t> crc;
  std::optional<std::string> link_name;
  uint64_t eh_frame_address = 0, eh_frame_hdr_address = 0;
  auto read_section = [](Cursor& value, std::optional<SectionBytes>& section) {
    std::span<const uint8_t> bytes = value.read_bin();
    section.emplace().bytes.assign(bytes.begin(), bytes.end());
  };
  for_each_entry(in, [&](std::string_view key, Cursor& value) {
    if (key == kPath.text()) return void(out.path = value.read_str());
    if (key == kBuildId.text()) return void(out.build_id = read_bin(value));
    if (key == kDev.text()) return void(out.dev = value.read_uint());
    if (key == kIno.text()) return void(out.ino = value.read_uint());
    if (key == kSegments.text()) {
      const uint32_t count = value.read_array_header();
      for (uint32_t i = 0; i < count; ++i) {
        if (value.read_array_header() != 5) throw DecodeError("a Module load segment is not 5 integers");
        LoadSegment& s = out.load_segments.emplace_back();
        s.vaddr = value.read_uint();
        s.offset = value.read_uint();
        s.filesz = value.read_uint();
        s.memsz = value.read_uint();
        s.flags = read_u32(value);
      }
      return;
    }
    if (key == kSymbolAddresses.text()) return void(address_steps = read_uint_array(value));
    if (key == kSymbolSizes.text()) return void(sizes = read_uint_array(value));
    if (key == kSymbolNames.text()) return void(names = read_str_array(value));
    if (key == kEhFrame.text()) return read_section(value, out.eh_frame);
    if (key == kEhFrameAddress.text()) return void(eh_frame_address = value.read_uint());
    if (key == kEhFrameHdr.text()) return read_section(value, out.eh_frame_hdr);
    if (key == kEhFrameHdrAddress.text()) return void(eh_frame_hdr_address = value.read_uint());
    if (key == kDebugFrame.text()) return read_section(value, out.debug_frame);
    if (key == kDebugLink.text()) return void(link_name = value.read_str());
    if (key == kDebugLinkCrc.text()) return void(crc = read_u32(value));
    if (key == kDebugFile.text()) return void(out.debug_file = value.read_str());
    value.skip_value();
  });
  if (sizes.size() != address_steps.size() || names.size() != address_steps.size())
    throw DecodeError("Module symbol columns differ in length");
  uint64_t address = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    address += address_steps[i];
    out.symbols.push_back({address, sizes[i], std::move(names[i])});
  }
  if (out.eh_frame) out.eh_frame->address = eh_frame_address;
  if (out.eh_frame_hdr) out.eh_frame_hdr->address = eh_frame_hdr_address;
  if (link_name) out.debug_link = DebugLink{std::move(*link_name), static_cast<uint32_t>(crc.value_or(0))};
}

}  // namespace

RecordOutcome decode_event(Cursor& in, Event& out, DecodeNotes& notes, const KnownTypes& known,
                           ModuleInfo* module) {
  if (!in.next_is_map()) {
    in.skip_value();
    return RecordOutcome::Skipped;
  }
  // Read every known key first: `type` may come anywhere in the map, and only
  // the keys that belong to the type are kept.
  const Cursor record_start = in;  // a Module record is read again by decode_module
  bool type_known = false, is_module = false;
  EventType type = EventType::Malloc;
  int32_t pid = 0, tid = 0, parent_pid = 0, exit_code = 0;
  int64_t member = 0;  // wider than Rss's: a key foreign to the type is no error
  uint64_t timestamp = 0, addr = 0, size = 0, old_addr = 0, old_size = 0;
  std::string_view path, comm;
  std::vector<std::string> argv;
  MappingInfo mapping;
  uint64_t stack_hash = 0;
  // The Stack keys as separate locals, not a StackDefinition: GCC zeroes an
  // aggregate that big with `rep stos`, whose start-up cost every record
  // paid (about 5% of the decoding time of an allocation-only trace).
  uint64_t hash = 0, miss_pc = 0, sp = 0;
  std::vector<uint64_t> chain, regs, fp_chain;
  std::optional<std::string_view> end;
  std::span<const uint8_t> stack_bytes;  // copied only into a Stack event
  bool truncated = false;
  for_each_entry(in, [&](std::string_view key, Cursor& value) {
    switch (key.size()) {
      case 2:
        if (key == kSp.text()) return void(sp = value.read_uint());
        break;
      case 3:
        if (key == kPid.text()) return void(pid = value.read_int<int32_t>());
        if (key == kTid.text()) return void(tid = value.read_int<int32_t>());
        if (key == kDev.text()) return void(mapping.dev = value.read_uint());
        if (key == kIno.text()) return void(mapping.ino = value.read_uint());
        if (key == kLen.text()) return void(mapping.len = value.read_uint());
        if (key == kEnd.text()) return void(end = value.read_str());
        break;
      case 4:
        if (key == kAddr.text()) return void(addr = value.read_uint());
        if (key == kType.text()) {
          const std::string_view name = value.read_str();
          is_module = name == kModuleType.text();
          return void(type_known = event_type_from_name(name, &type));
        }
        if (key == kSize.text()) return void(size = value.read_uint());
        if (key == kPath.text()) return void(path = value.read_str());
        if (key == kComm.text()) return void(comm = value.read_str());
        if (key == kArgv.text()) return void(argv = read_str_array(value));
        if (key == kProt.text()) return void(mapping.prot = read_u32(value));
        if (key == kHash.text()) return void(hash = value.read_uint());
        if (key == kRegs.text()) return void(regs = read_uint_array(value));
        break;
      case 5:
        if (key == kChain.text()) return void(chain = read_uint_array(value));
        if (key == kBytes.text()) return void(stack_bytes = value.read_bin());
        break;
      case 6:
        if (key == kMember.text()) return void(member = value.read_int<int64_t>());
        break;
      case 7:
        if (key == kMissPc.text()) return void(miss_pc = value.read_uint());
        break;
      case 8:
        if (key == kOldAddr.text()) return void(old_addr = value.read_uint());
        if (key == kFpChain.text()) return void(fp_chain = read_uint_array(value));
        if (key == kOldSize.text()) return void(old_size = value.read_uint());
        if (key == kBuildId.text()) return void(mapping.build_id = read_bin(value));
        break;
      case 9:
        if (key == kTimestamp.text()) return void(timestamp = value.read_uint());
        if (key == kExitCode.text()) return void(exit_code = value.read_int<int32_t>());
        if (key == kNewImage.text()) return void(mapping.new_image = value.read_bool());
        if (key == kTruncated.text()) return void(truncated = value.read_bool());
        break;
      case 10:
        if (key == kParentPid.text()) return void(parent_pid = value.read_int<int32_t>());
        if (key == kStackHash.text()) return void(stack_hash = value.read_uint());
        break;
      case 11:
        if (key == kFileOffset.text()) return void(mapping.file_offset = value.read_uint());
        break;
    }
    value.skip_value();
  });
  if (is_module && module) {
    Cursor again = record_start;
    decode_module(again, *module);
    return RecordOutcome::Module;
  }
  if (!type_known || !known.test(static_cast<size_t>(type))) return RecordOutcome::Skipped;

  out = Event{};
  out.type = type;
  out.pid = pid;
  out.tid = tid;
  out.timestamp = timestamp;
  out.addr = addr;
  switch (type) {
    case EventType::Malloc:
    case EventType::Calloc:
    case EventType::AlignedAlloc:
      out.size = size;
      out.stack_hash = stack_hash;
      break;
    case EventType::Realloc:
      out.size = size;
      out.old_addr = old_addr;
      out.stack_hash = stack_hash;
      break;
    case EventType::Free: break;
    case EventType::Fork: out.parent_pid = parent_pid; break;
    case EventType::Exec:
      // Always present on Exec, so consumers need no null check.
      out.image = std::make_shared<const ProcessImage>(
          ProcessImage{std::string(path), std::string(comm), std::move(argv)});
      break;
    case EventType::Exit: out.exit_code = exit_code; break;
    case EventType::Rss:
      // A member this reader cannot hold reads as an unknown one (-1).
      out.member = member >= 0 && member <= std::numeric_limits<int32_t>::max() ? static_cast<int32_t>(member) : -1;
      out.size = size;
      break;
    case EventType::Mremap:
      out.old_addr = old_addr;
      out.old_size = old_size;
      out.size = size;
      break;
    case EventType::Mmap:
    case EventType::Munmap: out.size = size; break;
    case EventType::Brk: out.old_addr = old_addr; break;
    case EventType::Mapping:
      mapping.path = path;
      out.mapping = std::make_shared<const MappingInfo>(std::move(mapping));
      break;
    case EventType::Stack: {
      auto stack = std::make_shared<StackDefinition>();
      stack->hash = hash;
      stack->chain = std::move(chain);
      stack->miss_pc = miss_pc;
      stack->sp = sp;
      stack->regs = std::move(regs);
      stack->bytes.assign(stack_bytes.begin(), stack_bytes.end());
      stack->truncated = truncated;
      stack->fp_chain = std::move(fp_chain);
      if (!end) {
        // Nothing says a walk was made (the seed's Stack records are raw
        // copies without `end`).
        stack->end = StackEnd::NotWalked;
      } else if (!stack_end_from_name(*end, &stack->end)) {
        // A reason from a newer writer: the walk did not complete for a
        // reason this reader cannot name; the raw copy, if any, still serves.
        stack->end = StackEnd::Unsupported;
        ++notes.unknown_stack_ends;
      }
      out.stack = std::move(stack);
      break;
    }
  }
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
