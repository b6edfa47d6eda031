#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <stdexcept>

#include "format/artifact.h"
#include "format/records.h"
#include "io/untrusted_file.h"

namespace memtrack {

namespace {

using msgpack_cursor::Cursor;
using msgpack_cursor::DecodeError;

// The whole file mapped read-only: frames are located and decompressed in
// place, and only the pages being read need to be resident.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    // Mapped, not read: any size. A FIFO or device is refused, never waited on.
    UntrustedFile file = UntrustedFile::open(path, kAnySize);
    int fd = file.fd();
    size_ = static_cast<size_t>(file.size());
    if (size_ > 0) {
      void* mapping = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (mapping == MAP_FAILED) {
        int error = errno;
        throw std::runtime_error(fmt::format("{}: cannot map: {}", path, std::strerror(error)));
      }
      ::madvise(mapping, size_, MADV_SEQUENTIAL);
      data_ = static_cast<const uint8_t*>(mapping);
    }
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

  // The bytes before `offset` are done with: their pages leave this
  // process's resident set (a long artifact would otherwise stay resident as
  // it is read, and the report's memory would grow with the file). Done in
  // steps of kReleaseStep, so the syscall is rare.
  void release_before(size_t offset) {
    constexpr size_t kReleaseStep = 16 << 20;
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    size_t end = offset / page * page;
    if (!data_ || end < released_ + kReleaseStep) return;
    ::madvise(const_cast<uint8_t*>(data_) + released_, end - released_, MADV_DONTNEED);
    released_ = end;
  }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t released_ = 0;
};

struct DCtxDeleter {
  void operator()(ZSTD_DCtx* dctx) const { ZSTD_freeDCtx(dctx); }
};

// Decompresses one zstd frame at a time into a reused buffer that never grows
// past kMaxFrameBytes, whatever the frame claims.
class FrameDecompressor {
 public:
  FrameDecompressor() : dctx_(ZSTD_createDCtx()) {
    if (!dctx_) throw std::bad_alloc();
    // No legitimate frame needs a window above its content limit; refusing
    // larger ones keeps zstd's own allocation bounded too.
    ZSTD_DCtx_setParameter(dctx_.get(), ZSTD_d_windowLogMax, kWindowLogMax);
  }

  // Returns an empty string on success (content() is then valid), or why the
  // frame is corrupt. zstd verifies the content checksum when there is one.
  std::string decompress(std::span<const uint8_t> frame) {
    ZSTD_DCtx_reset(dctx_.get(), ZSTD_reset_session_only);
    unsigned long long declared = ZSTD_getFrameContentSize(frame.data(), frame.size());
    if (declared == ZSTD_CONTENTSIZE_ERROR) return "invalid zstd frame header";
    if (declared == ZSTD_CONTENTSIZE_UNKNOWN) return decompress_streaming(frame);
    if (declared > kMaxFrameBytes) {
      return fmt::format("declares {} bytes of content, above the {} byte limit", declared,
                         kMaxFrameBytes);
    }
    if (buffer_.size() < declared) buffer_.resize(declared);
    size_t produced =
        ZSTD_decompressDCtx(dctx_.get(), buffer_.data(), declared, frame.data(), frame.size());
    if (ZSTD_isError(produced)) return ZSTD_getErrorName(produced);
    content_size_ = produced;
    return {};
  }

  std::span<const uint8_t> content() const { return {buffer_.data(), content_size_}; }

 private:
  static constexpr int kWindowLogMax = 26;
  static_assert(size_t{1} << kWindowLogMax == kMaxFrameBytes);

  // For frames without a declared size (other zstd writers): grow the
  // output buffer as needed, up to the limit.
  std::string decompress_streaming(std::span<const uint8_t> frame) {
    ZSTD_inBuffer input{frame.data(), frame.size(), 0};
    size_t produced = 0;
    for (;;) {
      if (produced == buffer_.size()) {
        if (buffer_.size() >= kMaxFrameBytes) {
          return fmt::format("decompresses to more than the {} byte limit", kMaxFrameBytes);
        }
        buffer_.resize(std::min(kMaxFrameBytes, std::max(buffer_.size() * 2, size_t{1} << 20)));
      }
      ZSTD_outBuffer output{buffer_.data(), buffer_.size(), produced};
      size_t status = ZSTD_decompressStream(dctx_.get(), &output, &input);
      produced = output.pos;
      if (ZSTD_isError(status)) return ZSTD_getErrorName(status);
      if (status == 0) break;  // frame complete (and its checksum verified)
      if (input.pos == input.size && output.pos < output.size) return "frame data ends early";
    }
    content_size_ = produced;
    return {};
  }

  std::unique_ptr<ZSTD_DCtx, DCtxDeleter> dctx_;
  std::vector<uint8_t> buffer_;  // sized to the largest frame so far
  size_t content_size_ = 0;
};

// Parses the header frame at the start of the file; returns its size.
size_t read_header(const std::string& path, const MappedFile& file, ReadResult& result) {
  const uint8_t* data = file.data();
  if (file.size() < records::kSkippableHeaderBytes ||
      !records::is_skippable_magic(records::load_le32(data))) {
    throw std::runtime_error(fmt::format("{}: not a memtrack artifact", path));
  }
  uint64_t frame_size = records::kSkippableHeaderBytes + uint64_t{records::load_le32(data + 4)};
  if (frame_size > file.size()) {
    throw std::runtime_error(fmt::format(
        "{}: truncated memtrack header: the header frame needs {} bytes, the file has {}", path,
        frame_size, file.size()));
  }
  std::span<const uint8_t> payload(data + records::kSkippableHeaderBytes,
                                   frame_size - records::kSkippableHeaderBytes);
  if (records::classify_skippable(payload) != records::SkippableKind::Header) {
    throw std::runtime_error(fmt::format("{}: not a memtrack artifact", path));
  }
  try {
    result.header = records::decode_header(payload);
  } catch (const DecodeError& e) {
    throw std::runtime_error(fmt::format("{}: corrupt memtrack header: {}", path, e.what()));
  }
  if (records::load_le32(data) != records::kSkippableMagic && result.header.format_version >= 2) {
    result.warnings.push_back(fmt::format("{}: the header's frame magic is damaged", path));
  }
  switch (records::verify_payload_checksum(payload)) {
    case records::ChecksumState::Valid: break;
    case records::ChecksumState::Mismatch:
      result.warnings.push_back(fmt::format(
          "{}: the header's checksum does not match: the header is damaged", path));
      break;
    case records::ChecksumState::Absent:
      if (result.header.format_version >= 2 && result.header.format_version <= kFormatVersion) {
        result.warnings.push_back(fmt::format(
            "{}: the header has no checksum although format_version {} requires one: the header "
            "is damaged",
            path, result.header.format_version));
      }
      break;
  }
  if (result.header.format_version > kFormatVersion) {
    result.warnings.push_back(fmt::format(
        "{}: format_version {} is newer than this reader's {}; records it does not know are "
        "skipped",
        path, result.header.format_version, kFormatVersion));
  }
  return frame_size;
}

// Decodes the records of a frame whose checksum verified, in order. Returns
// why the frame is corrupt, or an empty string. Bad MessagePack here can only
// come from a faulty writer; the records before it have been delivered.
std::string deliver_events(std::span<const uint8_t> content,
                           const std::function<void(const Event&)>& on_event,
                           const std::function<void(const ModuleInfo&)>& on_module,
                           const std::function<void(const AggregatePart&)>& on_aggregate, ReadStats& stats,
                           records::DecodeNotes& notes, records::HeapRunDecoder& heap_runs) {
  Cursor records_in(content.data(), content.data() + content.size());
  Event event;
  ModuleInfo module;
  records::HeapColumns heap;
  AggregatePart aggregate;
  heap_runs.start_frame();
  try {
    while (!records_in.at_end()) {
      switch (records::decode_event(records_in, event, notes, records::kAllTypes, &module, &heap, &aggregate)) {
        case records::RecordOutcome::Decoded:
          ++stats.events;
          heap_runs.observe(event);
          on_event(event);
          break;
        case records::RecordOutcome::Heap:
          heap_runs.expand(heap, event, on_event, stats.events);
          break;
        case records::RecordOutcome::Module:
          ++stats.modules;
          if (on_module) on_module(module);
          break;
        case records::RecordOutcome::Aggregate:
          ++stats.aggregate_parts;
          if (on_aggregate) on_aggregate(aggregate);
          break;
        case records::RecordOutcome::Skipped: ++stats.skipped_records; break;
      }
    }
  } catch (const DecodeError& e) {
    return fmt::format("bad MessagePack at content byte {}: {}",
                       records_in.position() - content.data(), e.what());
  }
  return {};
}

}  // namespace

ArtifactHeader read_artifact_header(const std::string& path) {
  MappedFile file(path);
  ReadResult result;
  read_header(path, file, result);
  return result.header;
}

ReadResult read_artifact(const std::string& path,
                         const std::function<void(const Event&)>& on_event) {
  return read_artifact(path, on_event, {});
}

ReadResult read_artifact(const std::string& path, const std::function<void(const Event&)>& on_event,
                         const std::function<void(const ModuleInfo&)>& on_module) {
  return read_artifact(path, on_event, on_module, {});
}

ReadResult read_artifact(const std::string& path, const std::function<void(const Event&)>& on_event,
                         const std::function<void(const ModuleInfo&)>& on_module,
                         const std::function<void(const AggregatePart&)>& on_aggregate) {
  MappedFile file(path);
  ReadResult result;
  size_t offset = read_header(path, file, result);
  FrameDecompressor decompressor;
  records::DecodeNotes notes;
  records::HeapRunDecoder heap_runs;  // the sites' live blocks cross frames
  // From format_version 2 on, every event frame has a marker in front.
  const bool markers_required = result.header.format_version >= 2 && result.header.format_version <= kFormatVersion;
  std::optional<records::FrameMarker> marker;  // the one for the next event frame
  std::vector<bool> sequence_seen;
  uint64_t unmarked_frames = 0;
  uint64_t moved_frames = 0;  // intact, but not where their marker is

  auto truncated = [&](uint64_t frame_index) {
    result.warnings.push_back(fmt::format(
        "{}: truncated: frame {} at byte offset {} is incomplete ({} bytes to the end of the "
        "file); the events of every complete frame before it were read",
        path, frame_index, offset, file.size() - offset));
  };
  // Reports `bytes` bytes at `offset` as damaged and skipped; the first
  // damage is the result's error, the others are warnings.
  auto damaged = [&](uint64_t frame_index, size_t bytes, std::string_view why) {
    ++result.stats.damaged_frames;
    result.stats.damaged_bytes += bytes;
    std::string message = fmt::format("{}: corrupt frame {} at byte offset {}: {}; {} bytes skipped",
                                      path, frame_index, offset, why, bytes);
    if (!result.error) {
      result.error = std::move(message);
    } else {
      result.warnings.push_back(std::move(message));
    }
  };
  // The next offset after `from` where a plausible frame starts, if any.
  auto resynchronise = [&](size_t from) -> std::optional<size_t> {
    for (size_t at = from; at + 4 <= file.size(); ++at) {
      const uint8_t* candidate = file.data() + at;
      uint32_t magic = records::load_le32(candidate);
      if (records::is_skippable_magic(magic)) {
        if (at + records::kSkippableHeaderBytes <= file.size() &&
            records::load_le32(candidate + 4) <= file.size() - at - records::kSkippableHeaderBytes) {
          return at;
        }
      } else if (magic == ZSTD_MAGICNUMBER &&
                 !ZSTD_isError(ZSTD_findFrameCompressedSize(candidate, file.size() - at))) {
        return at;
      }
    }
    return std::nullopt;
  };
  // Whether the event frame with this marker was already read (a duplicate);
  // notes it as seen otherwise.
  auto seen_before = [&](const records::FrameMarker& m, uint64_t frame_index) {
    if (m.sequence < sequence_seen.size() && sequence_seen[m.sequence]) {
      ++result.stats.duplicate_frames;
      result.warnings.push_back(fmt::format(
          "{}: frame {} at byte offset {} repeats event frame {} (sequence number); skipped", path,
          frame_index, offset, m.sequence));
      return true;
    }
    if (m.sequence < sequence_seen.size()) {
      result.warnings.push_back(fmt::format(
          "{}: frame {} at byte offset {} is event frame {}, out of order (expected sequence {})", path,
          frame_index, offset, m.sequence, sequence_seen.size()));
    } else {
      sequence_seen.resize(m.sequence + 1);
    }
    sequence_seen[m.sequence] = true;
    return false;
  };

  // Frame 0 is the header.
  uint64_t frame_index = 1;
  for (; offset < file.size() && !result.trailer; ++frame_index) {
    const uint8_t* frame = file.data() + offset;
    const size_t remaining = file.size() - offset;
    if (remaining < 4) {
      truncated(frame_index);
      break;
    }
    const uint32_t magic = records::load_le32(frame);
    size_t frame_size;
    if (records::is_skippable_magic(magic)) {
      if (remaining < records::kSkippableHeaderBytes ||
          records::load_le32(frame + 4) > remaining - records::kSkippableHeaderBytes) {
        // A damaged length, or the file ends: a later frame tells which.
        if (std::optional<size_t> next = resynchronise(offset + 1)) {
          damaged(frame_index, *next - offset, "skippable frame runs past the end of the file");
          offset = *next;
          continue;
        }
        truncated(frame_index);
        break;
      }
      frame_size = records::kSkippableHeaderBytes + records::load_le32(frame + 4);
      std::span<const uint8_t> payload(frame + records::kSkippableHeaderBytes,
                                       frame_size - records::kSkippableHeaderBytes);
      if (magic == records::kFrameMarkerMagic) {
        marker = records::decode_frame_marker(payload);
        // A marker whose numbers cannot be (damage the CRC missed, or forgery)
        // is ignored: a huge sequence number would size sequence_seen, a
        // tiny frame size would stop the walk.
        if (marker && (marker->sequence > file.size() / records::kFrameMarkerBytes ||
                       marker->frame_bytes < 4)) {
          result.stats.damaged_bytes += frame_size;
          result.warnings.push_back(fmt::format(
              "{}: frame {} at byte offset {}: frame marker with impossible numbers (sequence {}, {} "
              "bytes) although its checksum matches; ignored",
              path, frame_index, offset, marker->sequence, marker->frame_bytes));
          marker.reset();
        } else if (!marker) {
          result.stats.damaged_bytes += frame_size;
          result.warnings.push_back(fmt::format(
              "{}: frame {} at byte offset {}: damaged frame marker (its checksum does not match)",
              path, frame_index, offset));
        }
        offset += frame_size;
        --frame_index;  // a marker is numbered with its event frame
        continue;       // and stays pending for it
      }
      if (records::classify_skippable(payload) == records::SkippableKind::Trailer) {
        try {
          result.trailer = records::decode_trailer(payload);
        } catch (const DecodeError& e) {
          damaged(frame_index, frame_size, fmt::format("bad trailer: {}", e.what()));
          offset += frame_size;
          continue;
        }
        if (magic != records::kSkippableMagic && markers_required) {
          result.warnings.push_back(
              fmt::format("{}: the trailer's frame magic (byte offset {}) is damaged", path, offset));
        }
        switch (records::verify_payload_checksum(payload)) {
          case records::ChecksumState::Valid: break;
          case records::ChecksumState::Mismatch:
            result.warnings.push_back(fmt::format(
                "{}: the trailer's checksum does not match (byte offset {}): its counters are "
                "damaged",
                path, offset));
            break;
          case records::ChecksumState::Absent:
            if (markers_required) {
              result.warnings.push_back(fmt::format(
                  "{}: the trailer (byte offset {}) has no checksum: it is damaged", path, offset));
            }
            break;
        }
      } else {
        ++result.stats.skipped_frames;
      }
      marker.reset();
    } else {
      const std::optional<records::FrameMarker> frame_marker = std::exchange(marker, std::nullopt);
      // The marker's size is checksummed; the frame's own header may be the damaged part.
      const size_t found = magic == ZSTD_MAGICNUMBER ? ZSTD_findFrameCompressedSize(frame, remaining) : 0;
      const bool found_size = magic == ZSTD_MAGICNUMBER && !ZSTD_isError(found);
      // An intact frame (its own checksum verifies) of another size than its
      // marker says is not the frame the marker names: frames were moved
      // apart from their markers (reordered without them). It is read,
      // without a sequence number.
      if (frame_marker && found_size && found != frame_marker->frame_bytes &&
          decompressor.decompress({frame, found}).empty()) {
        ++moved_frames;
        result.warnings.push_back(fmt::format(
            "{}: frame {} at byte offset {} ({} bytes) is not event frame {} that its marker names ({} "
            "bytes): frames were moved apart from their markers; read without a sequence number",
            path, frame_index, offset, found, frame_marker->sequence, frame_marker->frame_bytes));
        frame_size = found;
        std::string failure = deliver_events(decompressor.content(), on_event, on_module, on_aggregate, result.stats, notes, heap_runs);
        if (failure.empty()) {
          ++result.stats.frames;
        } else {
          damaged(frame_index, frame_size, failure);
        }
        file.release_before(offset + frame_size);
        offset += frame_size;
        continue;
      }
      if (frame_marker && frame_marker->frame_bytes > remaining) {
        truncated(frame_index);
        break;
      }
      if (frame_marker) {
        frame_size = frame_marker->frame_bytes;
      } else if (found_size) {
        frame_size = found;
      } else {
        std::optional<size_t> next = resynchronise(offset + 1);
        if (!next && magic == ZSTD_MAGICNUMBER &&
            ZSTD_getErrorCode(found) == ZSTD_error_srcSize_wrong) {
          truncated(frame_index);  // the blocks run past the end of the file
          break;
        }
        std::string why = magic == ZSTD_MAGICNUMBER ? ZSTD_getErrorName(found)
                                                    : fmt::format("unknown frame magic {:#010x}", magic);
        size_t skipped = (next ? *next : file.size()) - offset;
        damaged(frame_index, skipped, why);
        if (!next) break;
        offset = *next;
        continue;
      }
      if (frame_marker && seen_before(*frame_marker, frame_index)) {
        offset += frame_size;
        continue;
      }
      if (!frame_marker) ++unmarked_frames;
      std::string failure;
      if (magic != ZSTD_MAGICNUMBER) {
        failure = fmt::format("unknown frame magic {:#010x}", magic);
      } else if (!found_size || found != frame_size) {
        failure = "the frame's size differs from its marker's";
      } else {
        failure = decompressor.decompress({frame, frame_size});
      }
      if (failure.empty()) {
        failure = deliver_events(decompressor.content(), on_event, on_module, on_aggregate, result.stats, notes, heap_runs);
      }
      if (failure.empty()) {
        ++result.stats.frames;
      } else {
        damaged(frame_index, frame_size, failure);
      }
      file.release_before(offset + frame_size);
    }
    offset += frame_size;
  }

  if (marker && offset >= file.size()) truncated(frame_index);  // a marker without its frame

  if (notes.unknown_stack_ends > 0) {
    result.warnings.push_back(fmt::format(
        "{}: {} Stack records end their walk for a reason this reader does not know; they "
        "read as \"unsupported\"",
        path, notes.unknown_stack_ends));
  }
  if (markers_required && unmarked_frames > 0) {
    result.warnings.push_back(fmt::format(
        "{}: {} event frames have no frame marker (sequence number): duplicates among them "
        "cannot be detected",
        path, unmarked_frames));
  }
  // Every sequence number below the highest seen, and below the trailer's
  // frame count, names a frame the writer wrote.
  uint64_t sequence_end = sequence_seen.size();
  if (result.trailer && !sequence_seen.empty()) sequence_end = std::max(sequence_end, result.trailer->frames);
  std::vector<uint64_t> missing;
  for (uint64_t sequence = 0; sequence < sequence_end; ++sequence) {
    if (sequence >= sequence_seen.size() || !sequence_seen[sequence]) missing.push_back(sequence);
  }
  result.stats.missing_frames = missing.size();
  if (!missing.empty()) {
    constexpr size_t kNamed = 10;
    std::vector<uint64_t> named(missing.begin(), missing.begin() + std::min(missing.size(), kNamed));
    result.warnings.push_back(fmt::format("{}: {} event frames are missing{} (sequence numbers {}{})",
                                          path, missing.size(),
                                          moved_frames ? " or among those read without a sequence number" : "",
                                          fmt::join(named, ", "), missing.size() > kNamed ? ", ..." : ""));
  }
  if (!result.trailer) {
    result.warnings.push_back(fmt::format("{}: no trailer: the recording was not finalized", path));
    return result;
  }
  // Finalized, yet incomplete: the recorder could not write everything (a
  // full disk, an I/O error) and counted what it left out.
  if (auto it = result.trailer->counters.find("write_error_records_dropped");
      it != result.trailer->counters.end() && it->second > 0) {
    result.warnings.push_back(fmt::format(
        "{}: incomplete: {} records were not written (a write failed while recording, e.g. the disk was "
        "full; counter write_error_records_dropped)",
        path, it->second));
  }
  if (offset < file.size()) {
    result.warnings.push_back(
        fmt::format("{}: {} bytes after the trailer (byte offset {}) were ignored", path,
                    file.size() - offset, offset));
  }
  uint64_t records_read =
      result.stats.events + result.stats.modules + result.stats.aggregate_parts + result.stats.skipped_records;
  if (result.trailer->events != records_read || result.trailer->frames != result.stats.frames) {
    result.warnings.push_back(fmt::format(
        "{}: the trailer counts {} events in {} frames, the file holds {} in {}", path,
        result.trailer->events, result.trailer->frames, records_read, result.stats.frames));
  }
  return result;
}

}  // namespace memtrack
