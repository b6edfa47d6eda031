// The artifact's header and trailer records, the skippable-frame envelope
// and the frame markers. Events and Module records: record_pack.cpp and
// record_decode.cpp.
#include "format/records.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
#include <zlib.h>

#include "format/record_codec.h"

namespace memtrack::records {

using namespace codec;

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
constexpr std::string_view kKernelFallbacks = "kernel_fallbacks";
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

}  // namespace

void ByteBuffer::grow(size_t extra) {
  size_t wanted = std::max({capacity_ * 2, size_ + extra, size_t{4096}});
  auto bigger = std::make_unique_for_overwrite<char[]>(wanted);
  if (size_ > 0) std::memcpy(bigger.get(), data_.get(), size_);
  data_ = std::move(bigger);
  capacity_ = wanted;
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
  // kernel_fallbacks only when there are any: older readers skip it.
  append_skippable_frame(out, header.kernel_fallbacks.empty() ? 12 : 13, [&](Packer& packer) {
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
    if (!header.kernel_fallbacks.empty()) {
      pack_str(packer, kKernelFallbacks);
      pack_str_array(packer, header.kernel_fallbacks);
    }
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
    } else if (key == kKernelFallbacks) {
      header.kernel_fallbacks = read_str_array(value);
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

