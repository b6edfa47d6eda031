// Helpers shared by the artifact tests: a self-deleting temp directory, raw
// file access, frame splitting and hand-made frames. Frames are built here
// with msgpack-cxx and libzstd directly, not with the code under test.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <zstd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <msgpack.hpp>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "format/artifact.h"
#include "format/msgpack_cursor.h"
#include "format/records.h"

namespace memtrack {

// Readable failure messages for EXPECT_EQ on events.
inline void PrintTo(const Event& event, std::ostream* out) {
  *out << event_type_name(event.type) << "{pid=" << event.pid << " tid=" << event.tid
       << " ts=" << event.timestamp << " addr=0x" << std::hex << event.addr << std::dec
       << " size=" << event.size << " old_addr=0x" << std::hex << event.old_addr << std::dec
       << " parent_pid=" << event.parent_pid << " exit_code=" << event.exit_code;
  if (event.image) {
    *out << " path=" << event.image->path << " comm=" << event.image->comm
         << " argc=" << event.image->argv.size();
  }
  if (event.mapping) {
    const MappingInfo& m = *event.mapping;
    *out << " len=" << m.len << " file_offset=" << m.file_offset << " dev=" << m.dev
         << " ino=" << m.ino << " build_id_bytes=" << m.build_id.size() << " prot=" << m.prot
         << " path=" << m.path << " new_image=" << m.new_image;
  }
  if (event.stack_hash != 0) *out << " stack_hash=0x" << std::hex << event.stack_hash << std::dec;
  if (event.stack) {
    const StackDefinition& s = *event.stack;
    *out << " hash=0x" << std::hex << s.hash << std::dec << " chain_len=" << s.chain.size()
         << " end=" << stack_end_name(s.end) << " miss_pc=0x" << std::hex << s.miss_pc
         << " sp=0x" << s.sp << std::dec << " regs=" << s.regs.size()
         << " bytes=" << s.bytes.size() << " truncated=" << s.truncated;
  }
  *out << "}";
}

}  // namespace memtrack

namespace memtrack::test {

using Bytes = std::vector<uint8_t>;

// A fresh directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/memtrack-format-test-XXXXXX";
    if (!::mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline void append(Bytes& to, const Bytes& bytes) {
  to.insert(to.end(), bytes.begin(), bytes.end());
}

struct FrameSpan {
  size_t offset = 0;
  size_t size = 0;
  bool skippable = false;
};

constexpr uint32_t kFrameMarkerMagic = 0x184D2A51;

// Splits a well-formed file into its frames: header, event frames, trailer,
// without the frame markers in front of event frames unless asked for.
inline std::vector<FrameSpan> split_frames(const Bytes& file, bool with_markers = false) {
  std::vector<FrameSpan> frames;
  size_t offset = 0;
  while (offset < file.size()) {
    uint32_t magic = file[offset] | file[offset + 1] << 8 | file[offset + 2] << 16 |
                     static_cast<uint32_t>(file[offset + 3]) << 24;
    FrameSpan span{offset, 0, (magic & 0xFFFFFFF0u) == 0x184D2A50u};
    span.size = ZSTD_findFrameCompressedSize(file.data() + offset, file.size() - offset);
    if (ZSTD_isError(span.size)) throw std::runtime_error("split_frames: malformed file");
    if (magic != kFrameMarkerMagic || with_markers) frames.push_back(span);
    offset += span.size;
  }
  return frames;
}

inline Bytes slice(const Bytes& file, const FrameSpan& span) {
  return Bytes(file.begin() + static_cast<std::ptrdiff_t>(span.offset),
               file.begin() + static_cast<std::ptrdiff_t>(span.offset + span.size));
}

inline Bytes skippable_frame(const msgpack::sbuffer& payload, uint32_t magic = 0x184D2A50) {
  Bytes frame;
  for (uint32_t word : {magic, static_cast<uint32_t>(payload.size())}) {
    for (int b = 0; b < 4; ++b) frame.push_back(static_cast<uint8_t>(word >> (8 * b)));
  }
  frame.insert(frame.end(), payload.data(), payload.data() + payload.size());
  return frame;
}

inline Bytes zstd_frame(std::string_view content, bool declare_size = true) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, declare_size ? 1 : 0);
  Bytes frame(ZSTD_compressBound(content.size()));
  size_t size = ZSTD_compress2(cctx, frame.data(), frame.size(), content.data(), content.size());
  ZSTD_freeCCtx(cctx);
  if (ZSTD_isError(size)) throw std::runtime_error("zstd_frame: compression failed");
  frame.resize(size);
  return frame;
}

inline Bytes zstd_frame(const msgpack::sbuffer& content, bool declare_size = true) {
  return zstd_frame(std::string_view(content.data(), content.size()), declare_size);
}

inline Bytes decompress_frame(const Bytes& file, const FrameSpan& span) {
  unsigned long long size = ZSTD_getFrameContentSize(file.data() + span.offset, span.size);
  Bytes content(size);
  size_t produced =
      ZSTD_decompress(content.data(), content.size(), file.data() + span.offset, span.size);
  if (ZSTD_isError(produced)) throw std::runtime_error("decompress_frame failed");
  content.resize(produced);
  return content;
}

using Packer = msgpack::packer<msgpack::sbuffer>;

inline void pack_key(Packer& packer, std::string_view key) {
  packer.pack_str(static_cast<uint32_t>(key.size()));
  packer.pack_str_body(key.data(), static_cast<uint32_t>(key.size()));
}

struct ReadBack {
  ReadResult result;
  std::vector<Event> events;
};

inline ReadBack read_back(const std::string& path) {
  ReadBack back;
  back.result = read_artifact(path, [&](const Event& event) { back.events.push_back(event); });
  return back;
}


inline Event alloc_event(EventType type, int32_t tid, uint64_t timestamp, uint64_t addr,
                         uint64_t size) {
  Event event;
  event.type = type;
  event.pid = 4242;
  event.tid = tid;
  event.timestamp = timestamp;
  event.addr = addr;
  event.size = size;
  return event;
}

// Random allocation records with only the fields their type carries.
inline std::vector<Event> random_events(size_t count, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Event> events;
  uint64_t timestamp = 1'000'000;
  for (size_t i = 0; i < count; ++i) {
    auto type = static_cast<EventType>(rng() % 5);  // Malloc .. Free
    timestamp += rng() % 2000;
    // One draw per statement: argument evaluation order is unspecified.
    auto tid = static_cast<int32_t>(4242 + rng() % 4);
    uint64_t addr = 0x5555'0000'0000 + (rng() % 100'000) * 16;
    uint64_t size = type == EventType::Free ? 0 : 8 + rng() % 8184;
    Event event = alloc_event(type, tid, timestamp, addr, size);
    if (type == EventType::Realloc) event.old_addr = rng() % 2 ? event.addr + 4096 : 0;
    events.push_back(event);
  }
  return events;
}

// The Malloc of docs/FORMAT.md's example, and its pinned seed-compatible
// encoding: 16 bytes at 0x7f00 by pid 1234, tid 1235, at 1000 ns.
inline Event seed_malloc_event() {
  Event event = alloc_event(EventType::Malloc, 1235, 1000, 0x7f00, 16);
  event.pid = 1234;
  return event;
}

inline Bytes seed_malloc_bytes() {
  // clang-format off
  return {
      0x86,
      0xa3, 'p', 'i', 'd', 0xcd, 0x04, 0xd2,
      0xa3, 't', 'i', 'd', 0xcd, 0x04, 0xd3,
      0xa9, 't', 'i', 'm', 'e', 's', 't', 'a', 'm', 'p', 0xcd, 0x03, 0xe8,
      0xa4, 'a', 'd', 'd', 'r', 0xcd, 0x7f, 0x00,
      0xa4, 't', 'y', 'p', 'e', 0xa6, 'M', 'a', 'l', 'l', 'o', 'c',
      0xa4, 's', 'i', 'z', 'e', 0x10,
  };
  // clang-format on
}

// Every record of every event frame, decoded as a reader that knows `known`
// would. `edit` may change each frame's content before it is decoded.
struct Decoded {
  std::vector<Event> events;
  uint64_t skipped = 0;
};

inline Decoded decode_frames_as(const Bytes& file, const records::KnownTypes& known,
                                const std::function<void(Bytes&)>& edit = {}) {
  Decoded decoded;
  records::DecodeNotes notes;
  for (const FrameSpan& span : split_frames(file)) {
    if (span.skippable) continue;
    Bytes content = decompress_frame(file, span);
    if (edit) edit(content);
    msgpack_cursor::Cursor in(content.data(), content.data() + content.size());
    while (!in.at_end()) {
      Event event;
      if (records::decode_event(in, event, notes, known) == records::RecordOutcome::Decoded) {
        decoded.events.push_back(event);
      } else {
        ++decoded.skipped;
      }
    }
  }
  return decoded;
}

// Writes `events` with the given options and an empty trailer.
inline void write_artifact(const std::string& path, const std::vector<Event>& events,
                           WriterOptions options = {}) {
  ArtifactWriter writer(path, ArtifactHeader{}, options);
  writer.append(events);
  writer.finish(ArtifactTrailer{});
}

// The header frame of a real artifact, to build hand-made files around. It
// says format_version 1, which has no frame markers: hand-made event frames
// need none.
inline Bytes writer_header() {
  TempDir dir;
  {
    ArtifactHeader version_one;
    version_one.format_version = 1;
    ArtifactWriter writer(dir.file("empty"), version_one);
    writer.finish(ArtifactTrailer{});
  }
  Bytes file = read_bytes(dir.file("empty"));
  return slice(file, split_frames(file).front());
}

// Reads back an artifact of the writer's header and one hand-made event
// frame holding `content`.
inline ReadBack read_hand_made_frame(const TempDir& dir, const msgpack::sbuffer& content) {
  Bytes file = writer_header();
  append(file, zstd_frame(content));
  write_bytes(dir.file("hand-made"), file);
  return read_back(dir.file("hand-made"));
}

// The first event frame was reported corrupt and no event was delivered.
inline ::testing::AssertionResult first_frame_corrupt(const ReadBack& back) {
  if (!back.result.error) return ::testing::AssertionFailure() << "no error";
  if (back.result.error->find("corrupt frame 1") == std::string::npos)
    return ::testing::AssertionFailure() << "unexpected error: " << *back.result.error;
  if (!back.events.empty()) return ::testing::AssertionFailure() << back.events.size() << " events delivered";
  return ::testing::AssertionSuccess();
}

}  // namespace memtrack::test
