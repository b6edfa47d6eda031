// Reading damaged, hostile, foreign or future artifacts: the reader must
// deliver exactly what it can vouch for, say what went wrong and where, and
// never crash, hang or allocate without bound.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <random>
#include <stdexcept>

#include "format/artifact.h"
#include "format_test_support.h"

namespace memtrack::test {
namespace {

using ::testing::HasSubstr;

constexpr size_t kMarkerBytes = 24;

uint32_t load_le32(const Bytes& file, size_t offset) {
  return file[offset] | file[offset + 1] << 8 | file[offset + 2] << 16 |
         static_cast<uint32_t>(file[offset + 3]) << 24;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

bool any_warning_contains(const ReadResult& result, const std::string& part) {
  return std::any_of(result.warnings.begin(), result.warnings.end(),
                     [&](const std::string& warning) { return contains(warning, part); });
}

Bytes trailer_frame(uint64_t events, uint64_t frames) {
  msgpack::sbuffer payload;
  Packer packer(payload);
  packer.pack_map(3);
  pack_key(packer, "record");
  pack_key(packer, "memtrack-trailer");
  pack_key(packer, "events");
  packer.pack(events);
  pack_key(packer, "frames");
  packer.pack(frames);
  return skippable_frame(payload);
}

void pack_free(Packer& packer, uint64_t addr) {
  packer.pack_map(5);
  pack_key(packer, "pid");
  packer.pack(1);
  pack_key(packer, "tid");
  packer.pack(1);
  pack_key(packer, "timestamp");
  packer.pack(addr);
  pack_key(packer, "addr");
  packer.pack(addr);
  pack_key(packer, "type");
  pack_key(packer, "Free");
}

msgpack::sbuffer packed_frees(std::initializer_list<uint64_t> addrs) {
  msgpack::sbuffer content;
  Packer packer(content);
  for (uint64_t addr : addrs) pack_free(packer, addr);
  return content;
}

Event free_event(uint64_t addr) {
  Event event = alloc_event(EventType::Free, 1, addr, addr, 0);
  event.pid = 1;
  return event;
}

// Where the event frames of a small multi-frame artifact start and end.
struct SmallArtifact {
  std::vector<Event> events;
  Bytes file;
  std::vector<FrameSpan> frames;  // header, event frames, trailer
  std::vector<FrameSpan> spans;   // the same with the frame markers
  size_t frame_events = 3;
};

SmallArtifact small_artifact(const TempDir& dir) {
  SmallArtifact artifact;
  artifact.events = random_events(14, 11);  // 5 event frames, the last one partial
  ArtifactTrailer trailer;
  trailer.counters = {{"alloc_events_lost", 0}};
  {
    ArtifactWriter writer(dir.file("source"), ArtifactHeader{},
                          {.frame_events = artifact.frame_events, .flush_interval = {}});
    writer.append(artifact.events);
    writer.finish(trailer);
  }
  artifact.file = read_bytes(dir.file("source"));
  artifact.frames = split_frames(artifact.file);
  artifact.spans = split_frames(artifact.file, /*with_markers=*/true);
  return artifact;
}

TEST(ArtifactRobustness, UnknownRecordsAndKeysAreSkipped) {
  TempDir dir;
  msgpack::sbuffer content;
  Packer packer(content);
  // A Malloc from a newer writer: an extra scalar key and an extra nested one.
  packer.pack_map(8);
  pack_key(packer, "member");
  packer.pack(uint64_t{0xdeadbeef});
  pack_key(packer, "pid");
  packer.pack(7);
  pack_key(packer, "tid");
  packer.pack(8);
  pack_key(packer, "timestamp");
  packer.pack(9);
  pack_key(packer, "addr");
  packer.pack(0x1000);
  pack_key(packer, "future");
  packer.pack(std::map<std::string, std::vector<int>>{{"a", {1, 2}}, {"b", {}}});
  pack_key(packer, "type");
  pack_key(packer, "Malloc");
  pack_key(packer, "size");
  packer.pack(32);
  // A record type this reader does not know (one of the seed's), with fields
  // it does.
  packer.pack_map(3);
  pack_key(packer, "type");
  pack_key(packer, "Rmap");
  pack_key(packer, "addr");
  packer.pack(0x400000);
  pack_key(packer, "path");
  pack_key(packer, "/lib/libc.so.6");
  // A map without a type.
  packer.pack_map(1);
  pack_key(packer, "pid");
  packer.pack(1);
  // Records that are not maps.
  packer.pack(42);
  pack_key(packer, "not a record");
  packer.pack(std::vector<int>{1, 2, 3});
  // A known record with a non-string key.
  packer.pack_map(6);
  packer.pack(5);
  packer.pack(std::vector<int>{5});
  pack_key(packer, "pid");
  packer.pack(1);
  pack_key(packer, "tid");
  packer.pack(1);
  pack_key(packer, "timestamp");
  packer.pack(0x2000);
  pack_key(packer, "addr");
  packer.pack(0x2000);
  pack_key(packer, "type");
  pack_key(packer, "Free");
  pack_free(packer, 0x3000);

  Bytes file = writer_header();
  append(file, zstd_frame(content));
  append(file, trailer_frame(8, 1));
  write_bytes(dir.file("a"), file);

  ReadBack back = read_back(dir.file("a"));
  Event malloc_event = alloc_event(EventType::Malloc, 8, 9, 0x1000, 32);
  malloc_event.pid = 7;
  EXPECT_EQ(back.events,
            (std::vector<Event>{malloc_event, free_event(0x2000), free_event(0x3000)}));
  EXPECT_EQ(back.result.stats.skipped_records, 5u);
  EXPECT_FALSE(back.result.error);
  EXPECT_TRUE(back.result.warnings.empty()) << back.result.warnings.front();
}

TEST(ArtifactRobustness, UnknownSkippableFramesAreSkipped) {
  TempDir dir;
  msgpack::sbuffer foreign_record, not_msgpack, second_header;
  Packer foreign_packer(foreign_record);
  foreign_packer.pack_map(2);
  pack_key(foreign_packer, "record");
  pack_key(foreign_packer, "memtrack-annotations");
  pack_key(foreign_packer, "notes");
  foreign_packer.pack(std::vector<std::string>{"x"});
  not_msgpack.write("\xc1\xc1 not msgpack", 14);
  Bytes header = writer_header();
  second_header.write(reinterpret_cast<const char*>(header.data() + 8), header.size() - 8);

  Bytes file = header;
  append(file, zstd_frame(packed_frees({1})));
  append(file, skippable_frame(foreign_record));
  append(file, skippable_frame(not_msgpack, 0x184D2A5F));
  append(file, skippable_frame(msgpack::sbuffer{}));  // empty payload
  append(file, skippable_frame(second_header));       // only the first header counts
  append(file, zstd_frame(packed_frees({2})));
  append(file, trailer_frame(2, 2));
  write_bytes(dir.file("a"), file);

  ReadBack back = read_back(dir.file("a"));
  EXPECT_EQ(back.events, (std::vector<Event>{free_event(1), free_event(2)}));
  EXPECT_EQ(back.result.stats.skipped_frames, 4u);
  EXPECT_EQ(back.result.stats.frames, 2u);
  EXPECT_TRUE(back.result.warnings.empty()) << back.result.warnings.front();
}

TEST(ArtifactRobustness, FramesWithoutDeclaredContentSizeDecode) {
  TempDir dir;
  msgpack::sbuffer content;
  Packer packer(content);
  for (uint64_t addr = 1; addr <= 100'000; ++addr) pack_free(packer, addr);
  Bytes file = writer_header();
  append(file, zstd_frame(content, /*declare_size=*/false));
  write_bytes(dir.file("a"), file);

  ReadBack back = read_back(dir.file("a"));
  ASSERT_EQ(back.events.size(), 100'000u);
  EXPECT_EQ(back.events.back(), free_event(100'000));
  EXPECT_FALSE(back.result.error);
}

// Cut the file at every byte: the reader must deliver exactly the events of
// the complete frames before the cut and say where the damage is.
TEST(ArtifactRobustness, TruncationAtEveryByteOffset) {
  TempDir dir;
  SmallArtifact artifact = small_artifact(dir);
  const FrameSpan& header = artifact.frames.front();
  const std::string path = dir.file("cut");

  for (size_t cut = 0; cut < artifact.file.size(); ++cut) {
    SCOPED_TRACE("cut at byte " + std::to_string(cut));
    write_bytes(path, Bytes(artifact.file.begin(),
                            artifact.file.begin() + static_cast<std::ptrdiff_t>(cut)));
    if (cut < header.size) {
      // Without a complete header there is nothing to vouch for.
      try {
        read_back(path);
        ADD_FAILURE() << "expected an exception";
      } catch (const std::runtime_error& e) {
        EXPECT_TRUE(contains(e.what(), path)) << e.what();
        EXPECT_TRUE(contains(e.what(), "not a memtrack artifact") ||
                    contains(e.what(), "truncated memtrack header"))
            << e.what();
      }
      continue;
    }
    // Reader messages number a frame marker with the event frame it precedes
    // and name the offset of the first byte missing from that pair.
    size_t complete_event_frames = 0;
    std::optional<std::pair<size_t, size_t>> partial;  // frame number, byte offset
    size_t number = 0;
    bool after_marker = false;
    for (size_t i = 1; i < artifact.spans.size(); ++i) {
      const FrameSpan& frame = artifact.spans[i];
      bool marker = load_le32(artifact.file, frame.offset) == kFrameMarkerMagic;
      if (!after_marker) ++number;
      if (frame.offset + frame.size <= cut) {
        complete_event_frames += !frame.skippable;
        after_marker = marker;
        continue;
      }
      if (frame.offset < cut) {
        partial = {number, frame.offset};
      } else if (after_marker) {
        partial = {number, cut};  // the marker arrived, its frame did not
      }
      break;
    }
    if (!partial && after_marker) partial = {number, cut};
    size_t expected_events =
        std::min(artifact.events.size(), complete_event_frames * artifact.frame_events);

    ReadBack back = read_back(path);
    EXPECT_FALSE(back.result.error) << *back.result.error;
    EXPECT_EQ(back.events, std::vector<Event>(artifact.events.begin(),
                                              artifact.events.begin() +
                                                  static_cast<std::ptrdiff_t>(expected_events)));
    EXPECT_FALSE(back.result.trailer);
    EXPECT_TRUE(any_warning_contains(back.result, "no trailer: the recording was not finalized"));
    if (partial) {
      EXPECT_TRUE(any_warning_contains(
          back.result, path + ": truncated: frame " + std::to_string(partial->first) +
                           " at byte offset " + std::to_string(partial->second)))
          << ::testing::PrintToString(back.result.warnings);
      EXPECT_EQ(back.result.warnings.size(), 2u);
    } else {
      EXPECT_EQ(back.result.warnings.size(), 1u);
    }
  }
}

// Events of the frames the damaged one's contents, nothing else, are lost.
std::vector<Event> without_frame(const SmallArtifact& artifact, size_t event_frame) {
  std::vector<Event> kept = artifact.events;
  auto first = kept.begin() + static_cast<std::ptrdiff_t>((event_frame - 1) * artifact.frame_events);
  kept.erase(first, first + static_cast<std::ptrdiff_t>(artifact.frame_events));
  return kept;
}

TEST(ArtifactRobustness, CorruptMiddleFrameIsSkippedAndNamed) {
  TempDir dir;
  SmallArtifact artifact = small_artifact(dir);
  const FrameSpan& victim = artifact.frames[3];  // the third event frame
  ASSERT_FALSE(victim.skippable);
  Bytes damaged = artifact.file;
  for (size_t i = victim.offset + victim.size / 2; i < victim.offset + victim.size / 2 + 4; ++i) {
    damaged[i] ^= 0x5a;
  }
  write_bytes(dir.file("damaged"), damaged);

  ReadBack back = read_back(dir.file("damaged"));
  ASSERT_TRUE(back.result.error);
  EXPECT_THAT(*back.result.error,
              HasSubstr(dir.file("damaged") + ": corrupt frame 3 at byte offset " +
                        std::to_string(victim.offset) + ": "));
  EXPECT_THAT(*back.result.error, HasSubstr(std::to_string(victim.size) + " bytes skipped"));
  EXPECT_EQ(back.events, without_frame(artifact, 3));
  EXPECT_EQ(back.result.stats.frames, 4u);
  EXPECT_EQ(back.result.stats.damaged_frames, 1u);
  EXPECT_EQ(back.result.stats.damaged_bytes, victim.size);
  EXPECT_EQ(back.result.stats.missing_frames, 0u);  // its marker said which it was
  EXPECT_TRUE(back.result.trailer);  // finalized, though damaged
}

// Item 6 of issue 9: a bit flip in the first event frame of a multi-frame
// artifact, in the zstd frame header, the block data or the checksum: every
// later frame is kept.
TEST(ArtifactRobustness, BitFlipInFrameOneKeepsEveryLaterFrame) {
  TempDir dir;
  SmallArtifact artifact = small_artifact(dir);
  const FrameSpan& victim = artifact.frames[1];
  for (size_t position : {victim.offset + 4, victim.offset + victim.size / 2, victim.offset + victim.size - 1}) {
    SCOPED_TRACE("flip at byte " + std::to_string(position));
    Bytes damaged = artifact.file;
    damaged[position] ^= 0x01;
    write_bytes(dir.file("damaged"), damaged);
    ReadBack back = read_back(dir.file("damaged"));
    ASSERT_TRUE(back.result.error);
    EXPECT_THAT(*back.result.error, HasSubstr("corrupt frame 1 at byte offset " + std::to_string(victim.offset)));
    EXPECT_EQ(back.events, without_frame(artifact, 1));
    EXPECT_EQ(back.result.stats.damaged_frames, 1u);
    EXPECT_TRUE(back.result.trailer);
  }
}

// Without a marker to give the damaged frame's size, the reader finds the
// next frame by its magic.
TEST(ArtifactRobustness, DamageWithoutMarkerResynchronisesOnTheNextFrame) {
  TempDir dir;
  SmallArtifact artifact = small_artifact(dir);
  Bytes damaged = artifact.file;
  const FrameSpan& victim = artifact.frames[2];
  size_t marker_offset = victim.offset - kMarkerBytes;
  // Both the marker's CRC and the zstd frame header are damaged.
  damaged[marker_offset + 10] ^= 0x01;
  damaged[victim.offset + 4] ^= 0xff;  // frame header descriptor
  write_bytes(dir.file("damaged"), damaged);
  ReadBack back = read_back(dir.file("damaged"));
  ASSERT_TRUE(back.result.error);
  EXPECT_EQ(back.events, without_frame(artifact, 2));
  EXPECT_TRUE(back.result.trailer);
  EXPECT_TRUE(any_warning_contains(back.result, "damaged frame marker"));
}

TEST(ArtifactRobustness, BadFrameMagicIsCorruption) {
  TempDir dir;
  SmallArtifact artifact = small_artifact(dir);
  Bytes damaged = artifact.file;
  damaged[artifact.frames[2].offset] = 'X';
  write_bytes(dir.file("damaged"), damaged);

  ReadBack back = read_back(dir.file("damaged"));
  ASSERT_TRUE(back.result.error);
  EXPECT_THAT(*back.result.error,
              HasSubstr("corrupt frame 2 at byte offset " +
                        std::to_string(artifact.frames[2].offset) + ": unknown frame magic"));
  EXPECT_EQ(back.events, without_frame(artifact, 2));
}

// A damaged byte in the event frames never yields wrong events: either the
// read reports it and delivers a prefix of the real events, or the byte was
// one zstd does not use (padding) and every event arrives intact.
TEST(ArtifactRobustness, DamagedBytesNeverYieldWrongEvents) {
  TempDir dir;
  SmallArtifact artifact = small_artifact(dir);
  size_t first = artifact.frames.front().size;
  size_t end = artifact.file.size();
  size_t undetected = 0;
  for (size_t position = first; position < end; ++position) {
    for (uint8_t flip : {0x01, 0x80, 0xff}) {
      SCOPED_TRACE("byte " + std::to_string(position) + " ^ " + std::to_string(flip));
      Bytes damaged = artifact.file;
      damaged[position] ^= flip;
      write_bytes(dir.file("damaged"), damaged);
      ReadBack back = read_back(dir.file("damaged"));
      if (!back.result.error && back.result.warnings.empty()) {
        EXPECT_EQ(back.events, artifact.events);
        ++undetected;
        continue;
      }
      // Whole frames may be missing, but every event delivered is real and in order.
      auto next = artifact.events.begin();
      for (const Event& event : back.events) {
        next = std::find(next, artifact.events.end(), event);
        ASSERT_NE(next, artifact.events.end());
        ++next;
      }
    }
  }
  EXPECT_LT(undetected, (end - first) / 20) << "almost every damaged byte must be detected";
}

TEST(ArtifactRobustness, GarbageAfterTheHeaderNeverCrashes) {
  TempDir dir;
  Bytes header = writer_header();
  std::mt19937 rng(12345);
  for (int round = 0; round < 300; ++round) {
    Bytes file = header;
    if (round % 2 == 0) append(file, {0x28, 0xb5, 0x2f, 0xfd});  // start like a zstd frame
    size_t length = rng() % 600;
    for (size_t i = 0; i < length; ++i) file.push_back(static_cast<uint8_t>(rng()));
    write_bytes(dir.file("garbage"), file);
    ReadBack back = read_back(dir.file("garbage"));
    EXPECT_TRUE(back.result.error || !back.result.warnings.empty()) << "round " << round;
  }
}

TEST(ArtifactRobustness, BadMessagePackInAVerifiedFrameIsAnError) {
  TempDir dir;
  msgpack::sbuffer bad;
  Packer packer(bad);
  pack_free(packer, 2);
  bad.write("\xc1", 1);  // never-used tag
  pack_free(packer, 3);
  Bytes file = writer_header();
  append(file, zstd_frame(packed_frees({1})));
  size_t bad_offset = file.size();
  append(file, zstd_frame(bad));
  write_bytes(dir.file("a"), file);

  ReadBack back = read_back(dir.file("a"));
  ASSERT_TRUE(back.result.error);
  EXPECT_THAT(*back.result.error, HasSubstr("corrupt frame 2 at byte offset " +
                                            std::to_string(bad_offset) + ": bad MessagePack"));
  // The verified frame's records before the bad one were delivered.
  EXPECT_EQ(back.events, (std::vector<Event>{free_event(1), free_event(2)}));
}

TEST(ArtifactRobustness, KnownKeyWithAWrongTypeIsAnError) {
  TempDir dir;
  for (auto pack_bad_value : std::vector<std::function<void(Packer&)>>{
           [](Packer& p) { pack_key(p, "1234"); },       // a string
           [](Packer& p) { p.pack(int64_t{1} << 40); },  // beyond int32
           [](Packer& p) { p.pack(-1.5); }}) {           // a float
    msgpack::sbuffer content;
    Packer packer(content);
    packer.pack_map(2);
    pack_key(packer, "type");
    pack_key(packer, "Free");
    pack_key(packer, "pid");
    pack_bad_value(packer);
    EXPECT_TRUE(first_frame_corrupt(read_hand_made_frame(dir, content)));
  }
}

// An argv of 30 million empty strings is 30 MB encoded but would take a
// gigabyte decoded: the reader calls such an array corrupt instead.
TEST(ArtifactRobustness, ArraysTooLongToDecodeAreCorrupt) {
  TempDir dir;
  msgpack::sbuffer content;
  Packer packer(content);
  packer.pack_map(3);
  pack_key(packer, "type");
  pack_key(packer, "Exec");
  pack_key(packer, "pid");
  packer.pack(7);
  pack_key(packer, "argv");
  constexpr uint32_t kStrings = 30'000'000;
  packer.pack_array(kStrings);
  std::string empties(kStrings, '\xa0');  // fixstr of length 0
  content.write(empties.data(), empties.size());
  EXPECT_TRUE(first_frame_corrupt(read_hand_made_frame(dir, content)));
}

TEST(ArtifactRobustness, HugeSkippableFrameClaims) {
  TempDir dir;
  Bytes claim = {0x50, 0x2a, 0x4d, 0x18, 0xff, 0xff, 0xff, 0xff};  // 4 GiB payload
  Bytes filler(1024, 0x90);

  Bytes as_header = claim;
  append(as_header, filler);
  write_bytes(dir.file("header"), as_header);
  try {
    read_back(dir.file("header"));
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr(dir.file("header") + ": truncated memtrack header"));
  }

  Bytes mid_file = writer_header();
  size_t claim_offset = mid_file.size();
  append(mid_file, claim);
  append(mid_file, filler);
  write_bytes(dir.file("mid"), mid_file);
  ReadBack back = read_back(dir.file("mid"));
  EXPECT_FALSE(back.result.error);
  EXPECT_TRUE(any_warning_contains(
      back.result, "truncated: frame 1 at byte offset " + std::to_string(claim_offset)));
}

TEST(ArtifactRobustness, FrameDeclaringHugeContentIsRejectedUpFront) {
  TempDir dir;
  Bytes file = writer_header();
  size_t frame_offset = file.size();
  // A hand-made zstd frame: 8-byte content size field claiming 1 TiB, a 1 KiB
  // window, then one raw block of 5 bytes.
  append(file, {0x28, 0xb5, 0x2f, 0xfd, 0xc0, 0x00});
  for (int b = 0; b < 8; ++b) file.push_back(b == 5 ? 0x01 : 0x00);  // 2^40, little-endian
  append(file, {(5 << 3) | 1, 0x00, 0x00, 0x90, 0x90, 0x90, 0x90, 0x90});
  write_bytes(dir.file("a"), file);

  ReadBack back = read_back(dir.file("a"));
  ASSERT_TRUE(back.result.error);
  EXPECT_THAT(*back.result.error,
              HasSubstr("corrupt frame 1 at byte offset " + std::to_string(frame_offset) +
                        ": declares 1099511627776 bytes of content"));
}

TEST(ArtifactRobustness, FrameDecompressingBeyondTheLimitIsRejected) {
  TempDir dir;
  // Zeros are valid MessagePack (one fixint record each), so only the size
  // limit stops this frame.
  std::string bomb(kMaxFrameBytes + 1, '\0');
  Bytes file = writer_header();
  append(file, zstd_frame(bomb, /*declare_size=*/false));
  write_bytes(dir.file("a"), file);

  ReadBack back = read_back(dir.file("a"));
  ASSERT_TRUE(back.result.error);
  EXPECT_THAT(*back.result.error, HasSubstr("corrupt frame 1"));
  EXPECT_THAT(*back.result.error, HasSubstr("decompresses to more than"));
  EXPECT_EQ(back.result.stats.skipped_records, 0u);
}

TEST(ArtifactRobustness, MissingFileThrowsNamingThePath) {
  TempDir dir;
  try {
    read_back(dir.file("absent.memtrack"));
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr(dir.file("absent.memtrack")));
    EXPECT_THAT(e.what(), HasSubstr("No such file"));
  }
}

TEST(ArtifactRobustness, NotAnArtifactThrows) {
  TempDir dir;
  msgpack::sbuffer other_map;
  Packer other(other_map);
  other.pack_map(1);
  pack_key(other, "record");
  pack_key(other, "something-else");
  std::vector<std::pair<std::string, Bytes>> files = {
      {"empty", {}},
      {"text", {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '\n'}},
      {"seed-style", zstd_frame(packed_frees({1}))},  // a bare zstd stream: no header
      {"other-skippable", skippable_frame(other_map)},
  };
  for (const auto& [name, bytes] : files) {
    write_bytes(dir.file(name), bytes);
    try {
      read_back(dir.file(name));
      ADD_FAILURE() << name << ": expected an exception";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), dir.file(name) + ": not a memtrack artifact");
    }
  }
}

TEST(ArtifactRobustness, NewerFormatVersionIsReadWithAWarning) {
  TempDir dir;
  msgpack::sbuffer header;
  Packer packer(header);
  packer.pack_map(4);
  pack_key(packer, "record");
  pack_key(packer, "memtrack-header");
  pack_key(packer, "magic");
  pack_key(packer, "memtrack");
  pack_key(packer, "format_version");
  packer.pack(kFormatVersion + 1);
  pack_key(packer, "compression_dictionary");  // something a future writer adds
  packer.pack(std::vector<int>{1, 2, 3});
  Bytes file = skippable_frame(header);
  append(file, zstd_frame(packed_frees({5})));
  append(file, trailer_frame(1, 1));
  write_bytes(dir.file("a"), file);

  ReadBack back = read_back(dir.file("a"));
  EXPECT_EQ(back.result.header.format_version, kFormatVersion + 1);
  EXPECT_EQ(back.events, std::vector<Event>{free_event(5)});
  ASSERT_EQ(back.result.warnings.size(), 1u);
  EXPECT_THAT(back.result.warnings[0],
              HasSubstr("format_version " + std::to_string(kFormatVersion + 1) + " is newer"));
}

TEST(ArtifactRobustness, HeaderWithoutVersionIsCorrupt) {
  TempDir dir;
  msgpack::sbuffer header;
  Packer packer(header);
  packer.pack_map(2);
  pack_key(packer, "record");
  pack_key(packer, "memtrack-header");
  pack_key(packer, "magic");
  pack_key(packer, "memtrack");
  write_bytes(dir.file("a"), skippable_frame(header));
  EXPECT_THROW(read_back(dir.file("a")), std::runtime_error);
}

TEST(ArtifactRobustness, TrailerDisagreeingWithTheFileWarns) {
  TempDir dir;
  Bytes file = writer_header();
  append(file, zstd_frame(packed_frees({1})));
  append(file, trailer_frame(5, 2));  // as if a frame had gone missing
  write_bytes(dir.file("a"), file);

  ReadBack back = read_back(dir.file("a"));
  ASSERT_EQ(back.result.warnings.size(), 1u);
  EXPECT_THAT(back.result.warnings[0],
              HasSubstr("the trailer counts 5 events in 2 frames, the file holds 1 in 1"));
}

TEST(ArtifactRobustness, BytesAfterTheTrailerWarn) {
  TempDir dir;
  Bytes file = writer_header();
  append(file, trailer_frame(0, 0));
  size_t end_of_trailer = file.size();
  append(file, {1, 2, 3});
  write_bytes(dir.file("a"), file);

  ReadBack back = read_back(dir.file("a"));
  EXPECT_TRUE(back.result.trailer);
  ASSERT_EQ(back.result.warnings.size(), 1u);
  EXPECT_THAT(back.result.warnings[0], HasSubstr("3 bytes after the trailer (byte offset " +
                                                 std::to_string(end_of_trailer)));
}

}  // namespace
}  // namespace memtrack::test
