// Stack records and stack_hash: their exact bytes, round trips of every kind
// of definition, the seed's form, malformed values, what a reader that
// predates them makes of an artifact that interleaves them with allocations,
// and damaged files whose frames hold big Stack records.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>

#include "format/artifact.h"
#include "format/records.h"
#include "format_test_support.h"

namespace memtrack::test {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();
constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
constexpr StackEnd kEveryEnd[] = {StackEnd::Complete,    StackEnd::Truncated, StackEnd::NoModule,
                                  StackEnd::NoRule,      StackEnd::Unsupported,
                                  StackEnd::BadFrame,    StackEnd::NotWalked, StackEnd::FrameLimit};

Event stack_event(int32_t pid, uint64_t timestamp, StackDefinition definition) {
  Event event;
  event.type = EventType::Stack;
  event.pid = pid;
  event.tid = pid + 1;
  event.timestamp = timestamp;
  event.stack = std::make_shared<const StackDefinition>(std::move(definition));
  return event;
}

// Return addresses in a PIE's text, innermost first.
std::vector<uint64_t> chain_of(size_t depth, uint64_t seed) {
  std::vector<uint64_t> chain;
  for (size_t i = 0; i < depth; ++i) chain.push_back(0x5555'5555'0000 + seed * 0x1000 + i * 0x40);
  return chain;
}

// A definition the kernel walked to the end.
StackDefinition walked(uint64_t hash, size_t depth) {
  StackDefinition definition;
  definition.hash = hash;
  definition.chain = chain_of(depth, hash % 64);
  definition.end = StackEnd::Complete;
  return definition;
}

// A raw copy of `size` random bytes with 17 registers and a partial chain.
StackDefinition raw(uint64_t hash, size_t size, uint32_t seed, StackEnd end = StackEnd::NoRule) {
  std::mt19937_64 rng(seed);
  StackDefinition definition;
  definition.hash = hash;
  definition.chain = chain_of(3, seed);
  definition.end = end;
  definition.miss_pc = 0x7f12'3456'7000 + seed;
  definition.sp = 0x7ffc'0000'0000 + seed * 16;
  for (int i = 0; i < 17; ++i) definition.regs.push_back(rng());
  definition.bytes.resize(size);
  for (uint8_t& byte : definition.bytes) byte = static_cast<uint8_t>(rng());
  definition.truncated = size >= 8192;
  // Some definitions carry the kernel's frame-pointer walk, some do not.
  if (seed % 2 == 0) definition.fp_chain = chain_of(5, seed + 1);
  return definition;
}

Bytes packed(const Event& event) {
  records::ByteBuffer buffer;
  records::pack_events(std::span<const Event>(&event, 1), buffer);
  return Bytes(buffer.data(), buffer.data() + buffer.size());
}

// The entry `stack_hash: hash` as the writer encodes it (hash above 2^32).
Bytes stack_hash_entry(uint64_t hash) {
  Bytes entry = {0xaa, 's', 't', 'a', 'c', 'k', '_', 'h', 'a', 's', 'h', 0xcf};
  for (int shift = 56; shift >= 0; shift -= 8) entry.push_back(static_cast<uint8_t>(hash >> shift));
  return entry;
}

TEST(StackRecord, LayoutOfWalkedAndRawDefinitionsAndStackHash) {
  TempDir dir;
  StackDefinition complete;
  complete.hash = 0x0102030405060708;
  complete.chain = {0x401000, 0x7f00};
  Event walked_event = stack_event(2, 4, complete);
  walked_event.tid = 3;
  StackDefinition copy;
  copy.hash = 9;
  copy.chain = {0x401000};
  copy.end = StackEnd::NoRule;
  copy.miss_pc = 0x401234;
  copy.sp = 0x7ffc0000;
  copy.regs = {1, 0x7ffc0000};
  copy.bytes = {0xde, 0xad};
  copy.truncated = true;
  Event raw_event = stack_event(2, 5, copy);
  raw_event.tid = 3;
  Event with_stack = seed_malloc_event();
  with_stack.stack_hash = 0x0102030405060708;
  write_artifact(dir.file("a.memtrack"), {walked_event, raw_event, with_stack, seed_malloc_event()});

  Bytes file = read_bytes(dir.file("a.memtrack"));
  std::vector<FrameSpan> frames = split_frames(file);
  ASSERT_EQ(frames.size(), 3u);
  // clang-format off
  Bytes expected = {
      0x88,  // no miss_pc, no raw copy
      0xa3, 'p', 'i', 'd', 0x02,
      0xa3, 't', 'i', 'd', 0x03,
      0xa9, 't', 'i', 'm', 'e', 's', 't', 'a', 'm', 'p', 0x04,
      0xa4, 'a', 'd', 'd', 'r', 0x00,
      0xa4, 't', 'y', 'p', 'e', 0xa5, 'S', 't', 'a', 'c', 'k',
      0xa4, 'h', 'a', 's', 'h', 0xcf, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
      0xa5, 'c', 'h', 'a', 'i', 'n', 0x92, 0xce, 0x00, 0x40, 0x10, 0x00, 0xcd, 0x7f, 0x00,
      0xa3, 'e', 'n', 'd', 0xa8, 'c', 'o', 'm', 'p', 'l', 'e', 't', 'e',
      0x8d,  // every key
      0xa3, 'p', 'i', 'd', 0x02,
      0xa3, 't', 'i', 'd', 0x03,
      0xa9, 't', 'i', 'm', 'e', 's', 't', 'a', 'm', 'p', 0x05,
      0xa4, 'a', 'd', 'd', 'r', 0x00,
      0xa4, 't', 'y', 'p', 'e', 0xa5, 'S', 't', 'a', 'c', 'k',
      0xa4, 'h', 'a', 's', 'h', 0x09,
      0xa5, 'c', 'h', 'a', 'i', 'n', 0x91, 0xce, 0x00, 0x40, 0x10, 0x00,
      0xa3, 'e', 'n', 'd', 0xa7, 'n', 'o', '-', 'r', 'u', 'l', 'e',
      0xa7, 'm', 'i', 's', 's', '_', 'p', 'c', 0xce, 0x00, 0x40, 0x12, 0x34,
      0xa2, 's', 'p', 0xce, 0x7f, 0xfc, 0x00, 0x00,
      0xa4, 'r', 'e', 'g', 's', 0x92, 0x01, 0xce, 0x7f, 0xfc, 0x00, 0x00,
      0xa5, 'b', 'y', 't', 'e', 's', 0xc4, 0x02, 0xde, 0xad,
      0xa9, 't', 'r', 'u', 'n', 'c', 'a', 't', 'e', 'd', 0xc3,
  };
  // clang-format on
  // The pinned Malloc with one more entry, stack_hash, at its end...
  Bytes malloc_with_stack = seed_malloc_bytes();
  malloc_with_stack[0] = 0x87;
  append(malloc_with_stack, stack_hash_entry(0x0102030405060708));
  append(expected, malloc_with_stack);
  // ...and without a stack, exactly the pinned seed-compatible bytes.
  append(expected, seed_malloc_bytes());
  EXPECT_EQ(decompress_frame(file, frames[1]), expected);
}

// On every allocation type, stack_hash is one more entry at the end of the
// map and nothing else changes; 0 writes nothing.
TEST(StackRecord, StackHashIsOneTrailingEntryOnEveryAllocationType) {
  Event realloc_moved = alloc_event(EventType::Realloc, 1, 2, 0x3000, 64);
  realloc_moved.old_addr = 0x2000;
  for (Event event : {alloc_event(EventType::Malloc, 1, 2, 0x1000, 8),
                      alloc_event(EventType::Calloc, 1, 2, 0x1000, 8),
                      alloc_event(EventType::AlignedAlloc, 1, 2, 0x1000, 8),
                      alloc_event(EventType::Realloc, 1, 2, 0x1000, 8), realloc_moved}) {
    SCOPED_TRACE(std::string(event_type_name(event.type)));
    Bytes without = packed(event);
    event.stack_hash = kMax64;
    Bytes with = packed(event);
    Bytes expected = without;
    ++expected[0];  // a fixmap: the count is in the first byte
    append(expected, stack_hash_entry(kMax64));
    EXPECT_EQ(with, expected);
  }
}

TEST(StackRecord, EveryKindOfDefinitionRoundTrips) {
  TempDir dir;
  std::vector<Event> events;
  uint64_t timestamp = 100;
  events.push_back(stack_event(7, ++timestamp, walked(kMax64, 300)));
  events.push_back(stack_event(7, ++timestamp, raw(2, 8192, 1, StackEnd::Truncated)));
  events.push_back(stack_event(7, ++timestamp, raw(3, 1, 2)));         // bin8
  events.push_back(stack_event(7, ++timestamp, raw(4, 70'000, 3)));    // bin32
  events.push_back(stack_event(kMin32, ++timestamp, walked(5, 0)));   // no chain at all
  for (StackEnd end : kEveryEnd) {
    StackDefinition definition = raw(10 + static_cast<uint64_t>(end), 64, 4, end);
    definition.miss_pc = end == StackEnd::NoModule ? kMax64 : 0;
    events.push_back(stack_event(8, ++timestamp, definition));
    StackDefinition walked_only = walked(20 + static_cast<uint64_t>(end), 5);
    walked_only.end = end;
    events.push_back(stack_event(8, ++timestamp, walked_only));
  }
  StackDefinition registers_only = raw(30, 16, 5);
  registers_only.regs.clear();
  registers_only.sp = 0;
  events.push_back(stack_event(8, ++timestamp, registers_only));
  for (EventType type : {EventType::Malloc, EventType::Calloc, EventType::AlignedAlloc,
                         EventType::Realloc}) {
    Event allocation = alloc_event(type, 9, ++timestamp, 0x1000, 32);
    allocation.stack_hash = type == EventType::Calloc ? kMax64 : timestamp;
    if (type == EventType::Realloc) allocation.old_addr = 0x800;
    events.push_back(allocation);
  }
  write_artifact(dir.file("a.memtrack"), events, {.frame_events = 5, .flush_interval = {}});

  ReadBack back = read_back(dir.file("a.memtrack"));
  EXPECT_EQ(back.events, events);
  EXPECT_FALSE(back.result.error);
  EXPECT_TRUE(back.result.warnings.empty()) << back.result.warnings.front();
  EXPECT_EQ(back.result.stats.skipped_records, 0u);
}

TEST(StackRecord, StackWithoutDefinitionReadsBackAsAnEmptyOne) {
  TempDir dir;
  Event bare;
  bare.type = EventType::Stack;
  bare.timestamp = 3;
  write_artifact(dir.file("a.memtrack"), {bare});

  ReadBack back = read_back(dir.file("a.memtrack"));
  ASSERT_EQ(back.events.size(), 1u);
  ASSERT_TRUE(back.events[0].stack);
  EXPECT_EQ(*back.events[0].stack, StackDefinition{});
}

// sp, regs and truncated describe the copied bytes; without bytes they are
// not written, so they read back as 0/empty/false.
TEST(StackRecord, RawKeysGoWithTheBytes) {
  TempDir dir;
  StackDefinition no_bytes = raw(1, 0, 1);
  no_bytes.truncated = true;
  write_artifact(dir.file("a.memtrack"), {stack_event(1, 1, no_bytes)});

  ReadBack back = read_back(dir.file("a.memtrack"));
  ASSERT_EQ(back.events.size(), 1u);
  StackDefinition expected = no_bytes;
  expected.sp = 0;
  expected.regs.clear();
  expected.truncated = false;
  EXPECT_EQ(*back.events[0].stack, expected);
}

TEST(StackRecord, FieldsForeignToTheTypeAreNotStored) {
  TempDir dir;
  auto definition = std::make_shared<const StackDefinition>(walked(1, 2));
  Event free_with_stack = alloc_event(EventType::Free, 1, 2, 0x10, 0);
  free_with_stack.stack_hash = 5;
  free_with_stack.stack = definition;
  Event malloc_with_definition = alloc_event(EventType::Malloc, 1, 3, 0x20, 8);
  malloc_with_definition.stack = definition;
  Event stack_with_hash = stack_event(1, 4, walked(1, 2));
  stack_with_hash.stack_hash = 6;
  write_artifact(dir.file("a.memtrack"),
                 {free_with_stack, malloc_with_definition, stack_with_hash});

  ReadBack back = read_back(dir.file("a.memtrack"));
  stack_with_hash.stack_hash = 0;
  EXPECT_EQ(back.events, (std::vector<Event>{alloc_event(EventType::Free, 1, 2, 0x10, 0),
                                             alloc_event(EventType::Malloc, 1, 3, 0x20, 8),
                                             stack_with_hash}));
}

// The seed's Stack record: 33 registers, a frame-pointer chain, no `end`.
TEST(StackRecord, SeedStackRecordsDecode) {
  TempDir dir;
  msgpack::sbuffer content;
  Packer packer(content);
  packer.pack_map(11);
  for (const char* key : {"pid", "tid"}) {
    pack_key(packer, key);
    packer.pack(77);
  }
  pack_key(packer, "timestamp");
  packer.pack(5);
  pack_key(packer, "addr");
  packer.pack(0);
  pack_key(packer, "type");
  pack_key(packer, "Stack");
  pack_key(packer, "hash");
  packer.pack(uint64_t{0xabcdef});
  pack_key(packer, "sp");
  packer.pack(uint64_t{0x7ffd0000});
  pack_key(packer, "regs");
  packer.pack(std::vector<uint64_t>(33, 7));
  pack_key(packer, "bytes");
  packer.pack_bin(3);
  packer.pack_bin_body("\x01\x02\x03", 3);
  pack_key(packer, "fp_chain");
  packer.pack(std::vector<uint64_t>{0x401000, 0x402000});
  pack_key(packer, "truncated");
  packer.pack(false);
  ReadBack back = read_hand_made_frame(dir, content);
  StackDefinition expected;
  expected.hash = 0xabcdef;
  expected.end = StackEnd::NotWalked;  // nothing says a walk was made
  expected.sp = 0x7ffd0000;
  expected.regs = std::vector<uint64_t>(33, 7);
  expected.bytes = {1, 2, 3};
  expected.fp_chain = {0x401000, 0x402000};  // the seed's key, read as ours
  Event expected_event = stack_event(77, 5, expected);
  expected_event.tid = 77;
  EXPECT_EQ(back.events, std::vector<Event>{expected_event});
  EXPECT_FALSE(back.result.error);
}

msgpack::sbuffer stack_records_ending(std::initializer_list<const char*> ends) {
  msgpack::sbuffer content;
  Packer packer(content);
  uint64_t hash = 0;
  for (const char* end : ends) {
    packer.pack_map(3);
    pack_key(packer, "type");
    pack_key(packer, "Stack");
    pack_key(packer, "hash");
    packer.pack(++hash);
    pack_key(packer, "end");
    pack_key(packer, end);
  }
  return content;
}

// A reason from a newer writer keeps the record: it reads as "unsupported"
// (the walk did not complete), and the reader says how many it saw.
TEST(StackRecord, UnknownEndReadsAsUnsupportedWithAWarning) {
  TempDir dir;
  Bytes file = writer_header();
  append(file, zstd_frame(stack_records_ending({"stack-overflow", "complete", ""})));
  append(file, zstd_frame(stack_records_ending({"Complete"})));
  write_bytes(dir.file("a"), file);

  ReadBack back = read_back(dir.file("a"));
  ASSERT_EQ(back.events.size(), 4u);
  std::vector<StackEnd> ends;
  for (const Event& event : back.events) ends.push_back(event.stack->end);
  EXPECT_EQ(ends, (std::vector<StackEnd>{StackEnd::Unsupported, StackEnd::Complete,
                                         StackEnd::Unsupported, StackEnd::Unsupported}));
  EXPECT_FALSE(back.result.error);
  EXPECT_THAT(back.result.warnings,
              ::testing::Contains(
                  dir.file("a") +
                  ": 3 Stack records end their walk for a reason this reader does not know; they "
                  "read as \"unsupported\""));
}

TEST(StackRecord, StackKeysWithWrongTypesAreCorrupt) {
  TempDir dir;
  struct Case {
    const char* type;
    std::function<void(Packer&)> pack_bad_entry;
  };
  for (const Case& bad : std::vector<Case>{
           {"Stack", [](Packer& p) { pack_key(p, "hash"), pack_key(p, "1"); }},
           {"Stack", [](Packer& p) { pack_key(p, "hash"), p.pack(-1); }},
           {"Stack", [](Packer& p) { pack_key(p, "chain"), p.pack(1); }},
           {"Stack", [](Packer& p) { pack_key(p, "chain"), p.pack(std::vector<int>{1, -2}); }},
           {"Stack", [](Packer& p) { pack_key(p, "chain"), p.pack(std::vector<double>{1.5}); }},
           {"Stack", [](Packer& p) { pack_key(p, "end"), p.pack(0); }},
           {"Stack", [](Packer& p) { pack_key(p, "end"), p.pack_bin(1), p.pack_bin_body("c", 1); }},
           {"Stack", [](Packer& p) { pack_key(p, "miss_pc"), pack_key(p, "0x1"); }},
           {"Stack", [](Packer& p) { pack_key(p, "sp"), p.pack(-8); }},
           {"Stack", [](Packer& p) { pack_key(p, "regs"), p.pack(std::map<int, int>{{1, 2}}); }},
           {"Stack", [](Packer& p) { pack_key(p, "bytes"), pack_key(p, "abcd"); }},
           {"Stack", [](Packer& p) { pack_key(p, "bytes"), p.pack_bin(3), p.pack_bin_body("ab", 2); }},
           {"Stack", [](Packer& p) { pack_key(p, "truncated"), p.pack(1); }},
           {"Stack", [](Packer& p) { pack_key(p, "truncated"), p.pack_nil(); }},
           // An array claiming 2^32 - 1 registers in a few bytes.
           {"Stack", [](Packer& p) { pack_key(p, "regs"), p.pack_array(0xffffffff), p.pack(1); }},
           {"Malloc", [](Packer& p) { pack_key(p, "stack_hash"), pack_key(p, "12"); }},
           {"Realloc", [](Packer& p) { pack_key(p, "stack_hash"), p.pack(-1); }}}) {
    msgpack::sbuffer content;
    Packer packer(content);
    packer.pack_map(2);
    pack_key(packer, "type");
    pack_key(packer, bad.type);
    bad.pack_bad_entry(packer);
    EXPECT_TRUE(first_frame_corrupt(read_hand_made_frame(dir, content)));
  }
}

// Replaces the encoded key `stack_hash` with one of the same length that no
// reader knows: the records then read as they do for a reader that predates
// stack_hash.
void forget_stack_hash(Bytes& content) {
  const Bytes key = {0xaa, 's', 't', 'a', 'c', 'k', '_', 'h', 'a', 's', 'h'};
  for (auto at = std::search(content.begin(), content.end(), key.begin(), key.end());
       at != content.end(); at = std::search(at, content.end(), key.begin(), key.end())) {
    std::fill(at + 1, at + static_cast<std::ptrdiff_t>(key.size()), 'z');
  }
}

// A reader from before Stack existed skips each Stack record alone and reads
// every allocation around it; stack_hash is just an unknown key to it (the
// seed's reader stopped at the first Stack record).
TEST(StackRecord, AReaderThatPredatesStacksKeepsEveryAllocation) {
  TempDir dir;
  std::vector<Event> written, old_allocations;
  size_t stacks = 0, with_hash = 0;
  uint64_t current_hash = 0;
  for (Event allocation : random_events(3000, 9)) {
    if (old_allocations.size() % 5 == 2) {
      current_hash = 0x9e37'79b9'7f4a'7c15 * (stacks + 1);
      written.push_back(stack_event(allocation.pid, allocation.timestamp,
                                    stacks % 2 ? raw(current_hash, 512, static_cast<uint32_t>(stacks))
                                               : walked(current_hash, 8)));
      ++stacks;
    }
    old_allocations.push_back(allocation);
    if (is_allocation(allocation.type)) {
      allocation.stack_hash = current_hash;
      with_hash += current_hash != 0;
    }
    written.push_back(allocation);
  }
  write_artifact(dir.file("a.memtrack"), written, {.frame_events = 500, .flush_interval = {}});
  Bytes file = read_bytes(dir.file("a.memtrack"));

  records::KnownTypes before_stacks = records::kAllTypes;
  before_stacks.reset(static_cast<size_t>(EventType::Stack));
  Decoded old_view = decode_frames_as(file, before_stacks, forget_stack_hash);
  EXPECT_EQ(old_view.events, old_allocations);
  EXPECT_EQ(old_view.skipped, stacks);
  EXPECT_GT(stacks, 500u);
  EXPECT_GT(with_hash, 2000u);

  ReadBack current = read_back(dir.file("a.memtrack"));
  EXPECT_EQ(current.events, written);
  EXPECT_EQ(current.result.stats.skipped_records, 0u);
}

// Frames of 32 KiB raw copies (stored by zstd mostly as raw blocks): a cut
// file still yields exactly the complete frames, and damage inside a copy's
// bytes is caught by the frame checksum rather than read as a wrong stack.
TEST(StackRecord, TruncationAndDamageWithBigStackRecords) {
  TempDir dir;
  constexpr size_t kFrameEvents = 4;
  std::vector<Event> events;
  for (uint32_t i = 0; i < 12; ++i) {
    StackDefinition definition = raw(1000 + i, 32 * 1024, i);
    definition.chain = chain_of(300, i);
    events.push_back(stack_event(5, 10 * i, definition));
    Event allocation = alloc_event(EventType::Malloc, 6, 10 * i + 1, 0x1000 * (i + 1), 64);
    allocation.stack_hash = 1000 + i;
    events.push_back(allocation);
    events.push_back(alloc_event(EventType::Free, 6, 10 * i + 2, 0x1000 * (i + 1), 0));
  }
  write_artifact(dir.file("source"), events, {.frame_events = kFrameEvents, .flush_interval = {}});
  const Bytes file = read_bytes(dir.file("source"));
  const std::vector<FrameSpan> frames = split_frames(file);
  ASSERT_EQ(frames.size(), 2 + events.size() / kFrameEvents);
  auto first_events = [&](size_t count) {
    return std::vector<Event>(events.begin(),
                              events.begin() + static_cast<std::ptrdiff_t>(count));
  };
  const std::string path = dir.file("damaged");

  for (size_t frame = 1; frame < frames.size(); ++frame) {
    const FrameSpan& span = frames[frame];
    for (size_t cut : {span.offset + 1, span.offset + span.size / 2, span.offset + span.size - 1}) {
      SCOPED_TRACE("cut at byte " + std::to_string(cut) + " in frame " + std::to_string(frame));
      write_bytes(path, Bytes(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(cut)));
      ReadBack back = read_back(path);
      EXPECT_FALSE(back.result.error);
      EXPECT_EQ(back.events, first_events(std::min(events.size(), (frame - 1) * kFrameEvents)));
      EXPECT_THAT(back.result.warnings,
                  ::testing::Contains(HasSubstr(": truncated: frame " + std::to_string(frame) +
                                                " at byte offset " +
                                                std::to_string(span.offset))));
    }
  }
  for (size_t frame = 1; frame + 1 < frames.size(); ++frame) {
    SCOPED_TRACE("damage in frame " + std::to_string(frame));
    const FrameSpan& span = frames[frame];
    Bytes damaged = file;
    for (size_t i = span.offset + span.size / 2; i < span.offset + span.size / 2 + 4; ++i) {
      damaged[i] ^= 0x5a;
    }
    write_bytes(path, damaged);
    ReadBack back = read_back(path);
    ASSERT_TRUE(back.result.error);
    EXPECT_THAT(*back.result.error, HasSubstr(path + ": corrupt frame " + std::to_string(frame) +
                                              " at byte offset " + std::to_string(span.offset)));
    // Only the damaged frame's events are lost.
    std::vector<Event> kept = events;
    kept.erase(kept.begin() + static_cast<std::ptrdiff_t>((frame - 1) * kFrameEvents),
               kept.begin() + static_cast<std::ptrdiff_t>(std::min(events.size(), frame * kFrameEvents)));
    EXPECT_EQ(back.events, kept);
  }
}

// Extreme records never pack beyond packed_size_bound(), and the bound is
// close enough not to close frames much too early.
TEST(StackRecord, SizeBoundCoversTheWidestRecords) {
  StackDefinition widest = raw(kMax64, 70'000, 1, StackEnd::Unsupported);
  widest.chain = std::vector<uint64_t>(300, kMax64);
  widest.regs = std::vector<uint64_t>(33, kMax64);
  widest.miss_pc = widest.sp = kMax64;
  Event widest_stack = stack_event(kMin32, kMax64, widest);
  widest_stack.tid = kMin32;
  widest_stack.addr = kMax64;
  Event realloc_event = alloc_event(EventType::Realloc, kMin32, kMax64, kMax64, kMax64);
  realloc_event.pid = kMin32;
  realloc_event.old_addr = realloc_event.stack_hash = kMax64;
  Event aligned = realloc_event;
  aligned.type = EventType::AlignedAlloc;
  for (const Event& event : {widest_stack, stack_event(1, 1, raw(1, 1, 1)),
                             stack_event(1, 1, walked(kMax64, 0)), realloc_event, aligned}) {
    SCOPED_TRACE(::testing::PrintToString(event));
    size_t size = packed(event).size();
    size_t bound = records::packed_size_bound(event);
    EXPECT_LE(size, bound);
    EXPECT_LE(bound, size + 300);
  }
}

// 2,000 definitions of 32 KiB and 300 frames (about 70 MB) are more than a
// frame should hold: the writer splits them into frames of about
// kTargetFrameBytes, each nearly full.
TEST(StackRecord, BigDefinitionsKeepFramesUnderTheByteLimit) {
  TempDir dir;
  StackDefinition big = raw(1, 32 * 1024, 3);
  std::fill(big.bytes.begin(), big.bytes.end(), uint8_t{0x42});  // quick to compress
  big.chain = std::vector<uint64_t>(300, kMax64);
  auto shared = std::make_shared<const StackDefinition>(big);
  std::vector<Event> events(2000);
  for (size_t i = 0; i < events.size(); ++i) {
    events[i].type = EventType::Stack;
    events[i].timestamp = i;
    events[i].stack = shared;
  }
  write_artifact(dir.file("a.memtrack"), events);

  Bytes file = read_bytes(dir.file("a.memtrack"));
  std::vector<FrameSpan> frames = split_frames(file);
  ASSERT_GE(frames.size(), 2u + 8u);  // header, at least 8 event frames, trailer
  for (size_t i = 1; i + 1 < frames.size(); ++i) {
    size_t content = decompress_frame(file, frames[i]).size();
    EXPECT_LE(content, kTargetFrameBytes) << "frame " << i;
    if (i + 2 < frames.size()) {
      EXPECT_GE(content, kTargetFrameBytes / 100 * 95) << "frame " << i;
    }
  }
  size_t matching = 0;
  ReadResult result = read_artifact(
      dir.file("a.memtrack"), [&](const Event& event) { matching += event == events[matching]; });
  EXPECT_EQ(matching, events.size());
  EXPECT_FALSE(result.error);
}

}  // namespace
}  // namespace memtrack::test
