// Mapping records: their exact bytes (the seed's keys first), decoding the
// seed's shorter form, malformed values, and what a reader that predates the
// type makes of an artifact that interleaves them with allocations.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "format/artifact.h"
#include "format/records.h"
#include "format_test_support.h"

namespace memtrack::test {
namespace {


// A Mapping event whose MappingInfo `fill` sets.
template <typename Fill>
Event mapping_event(int32_t pid, uint64_t timestamp, uint64_t start, Fill&& fill) {
  MappingInfo info;
  fill(info);
  Event event;
  event.type = EventType::Mapping;
  event.pid = pid;
  event.tid = pid;
  event.timestamp = timestamp;
  event.addr = start;
  event.mapping = std::make_shared<const MappingInfo>(std::move(info));
  return event;
}

TEST(MappingRecord, LayoutKeepsTheSeedKeysFirst) {
  TempDir dir;
  Event by_inode = mapping_event(2, 3, 0x7000, [](MappingInfo& m) {
    m.len = 0x1000;
    m.file_offset = 0x2000;
    m.dev = 0x800001;
    m.ino = 12;
    m.prot = 5;
    m.path = "/l";
  });
  Event by_build_id = mapping_event(2, 4, 0x9000, [](MappingInfo& m) {
    m.len = 16;
    m.build_id = {0xab, 0xcd};
    m.prot = 4;
    m.path = "/e";
    m.new_image = true;
  });
  write_artifact(dir.file("a.memtrack"), {by_inode, by_build_id});

  Bytes file = read_bytes(dir.file("a.memtrack"));
  std::vector<FrameSpan> frames = split_frames(file);
  ASSERT_EQ(frames.size(), 3u);
  // clang-format off
  Bytes expected = {
      0x8b,  // 11 entries: no build_id, no new_image
      0xa3, 'p', 'i', 'd', 0x02,
      0xa3, 't', 'i', 'd', 0x02,
      0xa9, 't', 'i', 'm', 'e', 's', 't', 'a', 'm', 'p', 0x03,
      0xa4, 'a', 'd', 'd', 'r', 0xcd, 0x70, 0x00,
      0xa4, 't', 'y', 'p', 'e', 0xa7, 'M', 'a', 'p', 'p', 'i', 'n', 'g',
      0xa4, 'p', 'a', 't', 'h', 0xa2, '/', 'l',
      0xa3, 'd', 'e', 'v', 0xce, 0x00, 0x80, 0x00, 0x01,
      0xa3, 'i', 'n', 'o', 0x0c,
      0xab, 'f', 'i', 'l', 'e', '_', 'o', 'f', 'f', 's', 'e', 't', 0xcd, 0x20, 0x00,
      0xa3, 'l', 'e', 'n', 0xcd, 0x10, 0x00,
      0xa4, 'p', 'r', 'o', 't', 0x05,
      0x8d,  // 13 entries
      0xa3, 'p', 'i', 'd', 0x02,
      0xa3, 't', 'i', 'd', 0x02,
      0xa9, 't', 'i', 'm', 'e', 's', 't', 'a', 'm', 'p', 0x04,
      0xa4, 'a', 'd', 'd', 'r', 0xcd, 0x90, 0x00,
      0xa4, 't', 'y', 'p', 'e', 0xa7, 'M', 'a', 'p', 'p', 'i', 'n', 'g',
      0xa4, 'p', 'a', 't', 'h', 0xa2, '/', 'e',
      0xa3, 'd', 'e', 'v', 0x00,
      0xa3, 'i', 'n', 'o', 0x00,
      0xab, 'f', 'i', 'l', 'e', '_', 'o', 'f', 'f', 's', 'e', 't', 0x00,
      0xa3, 'l', 'e', 'n', 0x10,
      0xa8, 'b', 'u', 'i', 'l', 'd', '_', 'i', 'd', 0xc4, 0x02, 0xab, 0xcd,
      0xa4, 'p', 'r', 'o', 't', 0x04,
      0xa9, 'n', 'e', 'w', '_', 'i', 'm', 'a', 'g', 'e', 0xc3,
  };
  // clang-format on
  EXPECT_EQ(decompress_frame(file, frames[1]), expected);
}

TEST(MappingRecord, MappingWithoutInfoReadsBackAsAnEmptyInfo) {
  TempDir dir;
  Event bare;
  bare.type = EventType::Mapping;
  bare.addr = 0x1000;
  write_artifact(dir.file("a.memtrack"), {bare});

  ReadBack back = read_back(dir.file("a.memtrack"));
  ASSERT_EQ(back.events.size(), 1u);
  ASSERT_TRUE(back.events[0].mapping);
  EXPECT_EQ(*back.events[0].mapping, MappingInfo{});
  EXPECT_EQ(back.events[0].addr, 0x1000u);
}

TEST(MappingRecord, LongPathAndBuildIdRoundTrip) {
  TempDir dir;
  std::vector<uint8_t> build_id(300);  // beyond bin8: a bin16 length
  for (size_t i = 0; i < build_id.size(); ++i) build_id[i] = static_cast<uint8_t>(i);
  Event event = mapping_event(1, 1, 0x1000, [&](MappingInfo& m) {
    m.len = 1;
    m.build_id = build_id;
    m.prot = 4;
    m.path = "/" + std::string(70000, 'p');
  });
  write_artifact(dir.file("a.memtrack"), {event});

  ReadBack back = read_back(dir.file("a.memtrack"));
  EXPECT_EQ(back.events, std::vector<Event>{event});
  EXPECT_FALSE(back.result.error);
}

// The seed's Mapping has neither build_id, prot nor new_image.
TEST(MappingRecord, SeedMappingRecordsDecode) {
  TempDir dir;
  msgpack::sbuffer content;
  Packer packer(content);
  packer.pack_map(10);
  for (const char* key : {"pid", "tid"}) {
    pack_key(packer, key);
    packer.pack(77);
  }
  pack_key(packer, "timestamp");
  packer.pack(5);
  pack_key(packer, "addr");
  packer.pack(uint64_t{0x7f0000000000});
  pack_key(packer, "type");
  pack_key(packer, "Mapping");
  pack_key(packer, "path");
  pack_key(packer, "/usr/bin/true");
  pack_key(packer, "dev");
  packer.pack((uint64_t{8} << 20) | 1);
  pack_key(packer, "ino");
  packer.pack(99);
  pack_key(packer, "file_offset");
  packer.pack(0x1000);
  pack_key(packer, "len");
  packer.pack(0x3000);
  ReadBack back = read_hand_made_frame(dir, content);
  Event expected = mapping_event(77, 5, 0x7f0000000000, [](MappingInfo& m) {
    m.len = 0x3000;
    m.file_offset = 0x1000;
    m.dev = (uint64_t{8} << 20) | 1;
    m.ino = 99;
    m.path = "/usr/bin/true";
  });
  EXPECT_EQ(back.events, std::vector<Event>{expected});
  EXPECT_FALSE(back.result.error);
}

TEST(MappingRecord, MappingKeysWithWrongTypesAreCorrupt) {
  TempDir dir;
  for (auto pack_bad_entry : std::vector<std::function<void(Packer&)>>{
           [](Packer& p) { pack_key(p, "build_id"), pack_key(p, "abcd"); },  // str, not bin
           [](Packer& p) { pack_key(p, "new_image"), p.pack(1); },          // int, not bool
           [](Packer& p) { pack_key(p, "prot"), p.pack(uint64_t{1} << 32); },
           [](Packer& p) { pack_key(p, "len"), p.pack(-1); },
           [](Packer& p) { pack_key(p, "build_id"), p.pack_bin(3), p.pack_bin_body("ab", 2); }}) {
    msgpack::sbuffer content;
    Packer packer(content);
    packer.pack_map(2);
    pack_key(packer, "type");
    pack_key(packer, "Mapping");
    pack_bad_entry(packer);
    EXPECT_TRUE(first_frame_corrupt(read_hand_made_frame(dir, content)));
  }
}

// A reader from before Mapping existed skips each Mapping record alone and
// reads every allocation around it (the seed's reader stopped at the first).
TEST(MappingRecord, AReaderThatPredatesMappingKeepsEveryOtherEvent) {
  TempDir dir;
  std::vector<Event> written, allocations;
  size_t mappings = 0;
  for (const Event& allocation : random_events(2000, 3)) {
    if (allocations.size() % 7 == 3) {
      uint64_t start = 0x7f00'0000'0000 + mappings * 0x10000;
      written.push_back(mapping_event(allocation.pid, allocation.timestamp, start, [&](MappingInfo& m) {
        m.len = 0x2000;
        m.file_offset = 0x1000;
        m.build_id = std::vector<uint8_t>(20, static_cast<uint8_t>(mappings));
        m.prot = 5;
        m.path = "/usr/lib/lib" + std::to_string(mappings) + ".so";
        m.new_image = mappings % 2 == 0;
      }));
      ++mappings;
    }
    written.push_back(allocation);
    allocations.push_back(allocation);
  }
  write_artifact(dir.file("a.memtrack"), written, {.frame_events = 500, .flush_interval = {}});
  Bytes file = read_bytes(dir.file("a.memtrack"));

  records::KnownTypes before_mapping = records::kAllTypes;
  before_mapping.reset(static_cast<size_t>(EventType::Mapping));
  Decoded old_view = decode_frames_as(file, before_mapping);
  EXPECT_EQ(old_view.events, allocations);
  EXPECT_EQ(old_view.skipped, mappings);
  EXPECT_GT(mappings, 250u);

  ReadBack current = read_back(dir.file("a.memtrack"));
  EXPECT_EQ(current.events, written);
  EXPECT_EQ(current.result.stats.skipped_records, 0u);
}

}  // namespace
}  // namespace memtrack::test
