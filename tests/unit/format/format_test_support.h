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
#include <iterator>
#include <msgpack.hpp>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "format/artifact.h"

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

// Splits a well-formed file into its frames.
inline std::vector<FrameSpan> split_frames(const Bytes& file) {
  std::vector<FrameSpan> frames;
  size_t offset = 0;
  while (offset < file.size()) {
    uint32_t magic = file[offset] | file[offset + 1] << 8 | file[offset + 2] << 16 |
                     static_cast<uint32_t>(file[offset + 3]) << 24;
    FrameSpan span{offset, 0, (magic & 0xFFFFFFF0u) == 0x184D2A50u};
    span.size = ZSTD_findFrameCompressedSize(file.data() + offset, file.size() - offset);
    if (ZSTD_isError(span.size)) throw std::runtime_error("split_frames: malformed file");
    frames.push_back(span);
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

// Writes `events` with the given options and an empty trailer.
inline void write_artifact(const std::string& path, const std::vector<Event>& events,
                           WriterOptions options = {}) {
  ArtifactWriter writer(path, ArtifactHeader{}, options);
  writer.append(events);
  writer.finish(ArtifactTrailer{});
}

}  // namespace memtrack::test
