// The bytes of the artifact's records: MessagePack encoding and decoding of
// events, the header and the trailer, and the skippable-frame envelope. The
// key names live here only, so the writer and the reader cannot disagree.
// Internal to src/format; the layout is specified in docs/FORMAT.md.
#pragma once

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include "format/artifact.h"
#include "format/heap_runs.h"
#include "format/module_info.h"
#include "format/msgpack_cursor.h"

namespace memtrack::records {

// zstd skippable frames use magics 0x184D2A50..0x184D2A5F; we write the first.
inline constexpr uint32_t kSkippableMagic = 0x184D2A50;
inline constexpr uint32_t kSkippableMagicMask = 0xFFFFFFF0;
inline constexpr size_t kSkippableHeaderBytes = 8;  // magic + payload length, both LE32

inline bool is_skippable_magic(uint32_t magic) {
  return (magic & kSkippableMagicMask) == kSkippableMagic;
}

inline uint32_t load_le32(const uint8_t* bytes) {
  return static_cast<uint32_t>(bytes[0]) | static_cast<uint32_t>(bytes[1]) << 8 |
         static_cast<uint32_t>(bytes[2]) << 16 | static_cast<uint32_t>(bytes[3]) << 24;
}

// A frame marker (format_version 2) is the skippable frame in front of each
// event frame: its sequence number and compressed size, with a CRC32 of both.
inline constexpr uint32_t kFrameMarkerMagic = 0x184D2A51;
inline constexpr size_t kFrameMarkerPayloadBytes = 16;
inline constexpr size_t kFrameMarkerBytes = kSkippableHeaderBytes + kFrameMarkerPayloadBytes;
struct FrameMarker {
  uint64_t sequence = 0;     // 0 for the first event frame
  uint32_t frame_bytes = 0;  // compressed size of the event frame that follows
};
void write_frame_marker(const FrameMarker& marker, uint8_t (&out)[kFrameMarkerBytes]);
// nullopt when the payload is not a marker's or its CRC does not match.
std::optional<FrameMarker> decode_frame_marker(std::span<const uint8_t> payload);

// Header and trailer payloads end with a `crc32` key over every byte before it.
enum class ChecksumState { Absent, Valid, Mismatch };
ChecksumState verify_payload_checksum(std::span<const uint8_t> payload);

// An append-only byte buffer for msgpack::packer. clear() keeps the memory, so
// a buffer reused frame after frame stops allocating once it has grown.
class ByteBuffer {
 public:
  ByteBuffer() = default;
  // A buffer moved from is empty, with no memory (the writer hands frames'
  // buffers between threads and fills the moved-from one next).
  ByteBuffer(ByteBuffer&& other) noexcept
      : data_(std::move(other.data_)),
        size_(std::exchange(other.size_, 0)),
        capacity_(std::exchange(other.capacity_, 0)) {}
  ByteBuffer& operator=(ByteBuffer&& other) noexcept {
    data_ = std::move(other.data_);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
    return *this;
  }
  void write(const char* bytes, size_t count) {
    if (count == 0) return;  // an empty bin's bytes may be null (memcpy's UB)
    if (capacity_ - size_ < count) grow(count);
    std::memcpy(data_.get() + size_, bytes, count);
    size_ += count;
  }
  void clear() { size_ = 0; }
  const char* data() const { return data_.get(); }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }

 private:
  void grow(size_t extra);

  std::unique_ptr<char[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// Appends each event as one MessagePack map.
void pack_events(std::span<const Event> events, ByteBuffer& out);
// An upper bound on the bytes pack_events() writes for `event`; the writer
// uses it to keep every frame under kMaxFrameBytes.
size_t packed_size_bound(const Event& event);
// Appends a Module record; its bound, as for events.
void pack_module(const ModuleInfo& module, ByteBuffer& out);
size_t packed_size_bound(const ModuleInfo& module);
// Appends an Aggregate record holding `part`.
void pack_aggregate_part(const AggregatePart& part, ByteBuffer& out);

// Append a complete skippable frame holding the header or trailer map.
void append_header_frame(const ArtifactHeader& header, ByteBuffer& out);
void append_trailer_frame(const ArtifactTrailer& trailer, ByteBuffer& out);

enum class RecordOutcome { Decoded, Module, Heap, Aggregate, Skipped };
// The record types a decoder accepts, indexed by EventType. The reader
// accepts all; tests pass fewer to read a file as an older reader that
// predates a type would.
using KnownTypes = std::bitset<kEventTypeCount>;
inline const KnownTypes kAllTypes = KnownTypes().set();
// What the decoder had to interpret rather than read, for the reader to warn
// about once per file.
struct DecodeNotes {
  // Stack records whose `end` names a reason this reader does not know
  // (from a newer writer); they read as StackEnd::Unsupported.
  uint64_t unknown_stack_ends = 0;
};
// Decodes the record at the cursor into `out`, a Module record into
// `module` (outcome Module), or a Heap record's columns into `heap` (outcome
// Heap; they point into the cursor's bytes), or an Aggregate record into
// `aggregate` (outcome Aggregate; its state points into the cursor's bytes).
// Records that are not maps, or whose `type` is missing or not in `known`,
// are consumed and reported as Skipped; so are Module, Heap and Aggregate
// records when their out-parameter is null, as a reader that predates them
// would.
// Throws msgpack_cursor::DecodeError on malformed MessagePack or a known key
// holding a value of the wrong type or range.
RecordOutcome decode_event(msgpack_cursor::Cursor& in, Event& out, DecodeNotes& notes,
                           const KnownTypes& known = kAllTypes, ModuleInfo* module = nullptr,
                           HeapColumns* heap = nullptr, AggregatePart* aggregate = nullptr);

enum class SkippableKind { Header, Trailer, Unknown };
// Unknown: not a MessagePack map, or no recognised `record` value.
SkippableKind classify_skippable(std::span<const uint8_t> payload);
// Both throw msgpack_cursor::DecodeError when a known key is malformed.
ArtifactHeader decode_header(std::span<const uint8_t> payload);
ArtifactTrailer decode_trailer(std::span<const uint8_t> payload);

}  // namespace memtrack::records
