#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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
                           const std::function<void(const ModuleInfo&)>& on_module, ReadStats& stats,
                           records::DecodeNotes& notes) {
  Cursor records_in(content.data(), content.data() + content.size());
  Event event;
  ModuleInfo module;
  try {
    while (!records_in.at_end()) {
      switch (records::decode_event(records_in, event, notes, records::kAllTypes, &module)) {
        case records::RecordOutcome::Decoded:
          ++stats.events;
          on_event(event);
          break;
        case records::RecordOutcome::Module:
          ++stats.modules;
          if (on_module) on_module(module);
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
  MappedFile file(path);
  ReadResult result;
  size_t offset = read_header(path, file, result);
  FrameDecompressor decompressor;
  records::DecodeNotes notes;

  auto truncated = [&](uint64_t frame_index) {
    result.warnings.push_back(fmt::format(
        "{}: truncated: frame {} at byte offset {} is incomplete ({} bytes to the end of the "
        "file); the events of every complete frame before it were read",
        path, frame_index, offset, file.size() - offset));
  };
  auto corrupt = [&](uint64_t frame_index, std::string_view why) {
    result.error =
        fmt::format("{}: corrupt frame {} at byte offset {}: {}", path, frame_index, offset, why);
  };

  // Frame 0 is the header.
  for (uint64_t frame_index = 1; offset < file.size() && !result.trailer; ++frame_index) {
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
        truncated(frame_index);
        break;
      }
      frame_size = records::kSkippableHeaderBytes + records::load_le32(frame + 4);
      std::span<const uint8_t> payload(frame + records::kSkippableHeaderBytes,
                                       frame_size - records::kSkippableHeaderBytes);
      if (records::classify_skippable(payload) == records::SkippableKind::Trailer) {
        try {
          result.trailer = records::decode_trailer(payload);
        } catch (const DecodeError& e) {
          corrupt(frame_index, fmt::format("bad trailer: {}", e.what()));
          break;
        }
      } else {
        ++result.stats.skipped_frames;
      }
    } else if (magic == ZSTD_MAGICNUMBER) {
      frame_size = ZSTD_findFrameCompressedSize(frame, remaining);
      if (ZSTD_isError(frame_size)) {
        // srcSize_wrong: the frame's blocks run past the end of the file.
        if (ZSTD_getErrorCode(frame_size) == ZSTD_error_srcSize_wrong) {
          truncated(frame_index);
        } else {
          corrupt(frame_index, ZSTD_getErrorName(frame_size));
        }
        break;
      }
      std::string failure = decompressor.decompress({frame, frame_size});
      if (!failure.empty()) {
        corrupt(frame_index, failure);
        break;
      }
      failure = deliver_events(decompressor.content(), on_event, on_module, result.stats, notes);
      if (!failure.empty()) {
        corrupt(frame_index, failure);
        break;
      }
      ++result.stats.frames;
      file.release_before(offset + frame_size);
    } else {
      corrupt(frame_index, fmt::format("unknown frame magic {:#010x}", magic));
      break;
    }
    offset += frame_size;
  }

  if (notes.unknown_stack_ends > 0) {
    result.warnings.push_back(fmt::format(
        "{}: {} Stack records end their walk for a reason this reader does not know; they "
        "read as \"unsupported\"",
        path, notes.unknown_stack_ends));
  }
  if (result.error) return result;
  if (!result.trailer) {
    result.warnings.push_back(fmt::format("{}: no trailer: the recording was not finalized", path));
    return result;
  }
  if (offset < file.size()) {
    result.warnings.push_back(
        fmt::format("{}: {} bytes after the trailer (byte offset {}) were ignored", path,
                    file.size() - offset, offset));
  }
  uint64_t records_read = result.stats.events + result.stats.modules + result.stats.skipped_records;
  if (result.trailer->events != records_read || result.trailer->frames != result.stats.frames) {
    result.warnings.push_back(fmt::format(
        "{}: the trailer counts {} events in {} frames, the file holds {} in {}", path,
        result.trailer->events, result.trailer->frames, records_read, result.stats.frames));
  }
  return result;
}

}  // namespace memtrack
