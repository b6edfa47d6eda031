// Rss, Mmap, Munmap, Mremap and Brk records (docs/FORMAT.md §2.5): their
// exact layout (the seed's Rss keys), round trips, and readers from before
// them, which skip each record alone and keep every allocation around it.
#include <gtest/gtest.h>

#include <msgpack.hpp>
#include <string>
#include <vector>

#include "format/artifact.h"
#include "format/records.h"
#include "format_test_support.h"

namespace memtrack::test {
namespace {

Event memory_event(EventType type, uint64_t timestamp) {
  Event e;
  e.type = type;
  e.pid = 4242;
  e.tid = 4243;
  e.timestamp = timestamp;
  switch (type) {
    case EventType::Rss:
      e.member = static_cast<int32_t>(timestamp % 4);
      e.size = 4096 * (timestamp % 1000);
      break;
    case EventType::Mremap:
      e.old_addr = 0x7f00'0000'0000 + timestamp * 4096;
      e.old_size = 1 << 20;
      [[fallthrough]];
    case EventType::Mmap:
    case EventType::Munmap:
      e.addr = 0x7f10'0000'0000 + timestamp * 4096;
      e.size = 4 << 20;
      break;
    case EventType::Brk:
      e.old_addr = 0x5555'0000'0000;
      e.addr = e.old_addr + (timestamp % 64) * 4096;
      break;
    default: break;
  }
  return e;
}

Bytes packed(const Event& event) {
  records::ByteBuffer out;
  records::pack_events(std::span(&event, 1), out);
  return Bytes(out.data(), out.data() + out.size());
}

// The record as a plain MessagePack map, decoded with msgpack-cxx.
std::map<std::string, msgpack::object> as_map(const Bytes& bytes, msgpack::object_handle& handle) {
  handle = msgpack::unpack(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  std::map<std::string, msgpack::object> map;
  const msgpack::object_map& entries = handle.get().via.map;
  for (uint32_t i = 0; i < entries.size; ++i) map[entries.ptr[i].key.as<std::string>()] = entries.ptr[i].val;
  return map;
}

TEST(MemoryRecord, RssHasTheSeedKeys) {
  Event rss = memory_event(EventType::Rss, 1001);
  msgpack::object_handle handle;
  auto map = as_map(packed(rss), handle);
  EXPECT_EQ(map.size(), 7u);
  EXPECT_EQ(map.at("type").as<std::string>(), "Rss");
  EXPECT_EQ(map.at("member").as<int32_t>(), 1);
  EXPECT_EQ(map.at("size").as<uint64_t>(), 4096u);
}

TEST(MemoryRecord, MappingRecordsCarryTheirKeys) {
  msgpack::object_handle handle;
  auto mremap = as_map(packed(memory_event(EventType::Mremap, 7)), handle);
  EXPECT_EQ(mremap.at("type").as<std::string>(), "Mremap");
  EXPECT_EQ(mremap.at("old_addr").as<uint64_t>(), 0x7f00'0000'0000u + 7 * 4096);
  EXPECT_EQ(mremap.at("old_size").as<uint64_t>(), 1u << 20);
  EXPECT_EQ(mremap.at("addr").as<uint64_t>(), 0x7f10'0000'0000u + 7 * 4096);
  EXPECT_EQ(mremap.at("size").as<uint64_t>(), 4u << 20);
  auto brk = as_map(packed(memory_event(EventType::Brk, 9)), handle);
  EXPECT_EQ(brk.size(), 6u);
  EXPECT_EQ(brk.at("old_addr").as<uint64_t>(), 0x5555'0000'0000u);
  auto mmap = as_map(packed(memory_event(EventType::Mmap, 3)), handle);
  EXPECT_EQ(mmap.size(), 6u);
  EXPECT_EQ(mmap.at("size").as<uint64_t>(), 4u << 20);
}

std::vector<Event> mixed_trace(std::vector<Event>* allocations_only) {
  const EventType kinds[] = {EventType::Rss, EventType::Mmap, EventType::Munmap, EventType::Mremap, EventType::Brk};
  std::vector<Event> written;
  size_t i = 0;
  for (const Event& allocation : random_events(3000, 21)) {
    if (i % 3 == 1) written.push_back(memory_event(kinds[i % 5], allocation.timestamp));
    written.push_back(allocation);
    allocations_only->push_back(allocation);
    ++i;
  }
  return written;
}

TEST(MemoryRecord, AMemberOutOfRangeReadsAsUnknown) {
  msgpack::sbuffer content;
  msgpack::packer<msgpack::sbuffer> packer(content);
  packer.pack_map(3);
  packer.pack(std::string("type"));
  packer.pack(std::string("Rss"));
  packer.pack(std::string("member"));
  packer.pack(uint64_t{1} << 40);
  packer.pack(std::string("size"));
  packer.pack(4096);
  msgpack_cursor::Cursor in(reinterpret_cast<const uint8_t*>(content.data()),
                            reinterpret_cast<const uint8_t*>(content.data()) + content.size());
  Event event;
  records::DecodeNotes notes;
  ASSERT_EQ(records::decode_event(in, event, notes), records::RecordOutcome::Decoded);
  EXPECT_EQ(event.member, -1);
  EXPECT_EQ(event.size, 4096u);
}

TEST(MemoryRecord, EveryRecordRoundTrips) {
  TempDir dir;
  std::vector<Event> allocations;
  std::vector<Event> written = mixed_trace(&allocations);
  write_artifact(dir.file("a.memtrack"), written, {.frame_events = 500, .flush_interval = {}});
  ReadBack back = read_back(dir.file("a.memtrack"));
  EXPECT_EQ(back.events, written);
  EXPECT_EQ(back.result.stats.skipped_records, 0u);
  EXPECT_TRUE(back.result.warnings.empty());
}

TEST(MemoryRecord, AReaderThatPredatesThemKeepsEveryAllocation) {
  TempDir dir;
  std::vector<Event> allocations;
  std::vector<Event> written = mixed_trace(&allocations);
  write_artifact(dir.file("a.memtrack"), written, {.frame_events = 500, .flush_interval = {}});
  records::KnownTypes before = records::kAllTypes;
  for (EventType t : {EventType::Rss, EventType::Mmap, EventType::Munmap, EventType::Mremap, EventType::Brk})
    before.reset(static_cast<size_t>(t));
  Decoded old_view = decode_frames_as(read_bytes(dir.file("a.memtrack")), before);
  EXPECT_EQ(old_view.events, allocations);
  EXPECT_EQ(old_view.skipped, written.size() - allocations.size());
  EXPECT_EQ(old_view.skipped, 1000u);
}

TEST(MemoryRecord, SizeBoundCoversThem) {
  for (EventType t : {EventType::Rss, EventType::Mmap, EventType::Munmap, EventType::Mremap, EventType::Brk}) {
    Event e = memory_event(t, 12345);
    e.pid = e.tid = -1;
    e.timestamp = e.addr = e.old_addr = e.size = e.old_size = UINT64_MAX;
    e.member = INT32_MIN;
    EXPECT_LE(packed(e).size(), records::packed_size_bound(e)) << event_type_name(t);
  }
}

}  // namespace
}  // namespace memtrack::test
