// The compact layout (docs/FORMAT.md §2.7) keeps the crash-safety promises
// of docs/RELIABILITY.md: a file cut at any byte reads as the events of its
// complete frames, the same as the whole file's first ones; a damaged frame
// costs its own events (and the frees that name its blocks), never the
// reader; the frames' tables and the blocks cross frames as they should.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "format/heap_runs.h"
#include "format_test_support.h"

namespace memtrack::test {
namespace {


// Allocations and frees of a few threads, Rss records between them so that
// runs end and (frame_events = 4) frames close often.
std::vector<Event> mixed_events() {
  std::vector<Event> events = random_events(600, 11);
  for (size_t i = 0; i < events.size(); i += 13) {
    Event rss;
    rss.type = EventType::Rss;
    rss.pid = 4242;
    rss.tid = 4242;
    rss.timestamp = events[i].timestamp;
    rss.size = 4096 * i;
    events.insert(events.begin() + static_cast<std::ptrdiff_t>(i), rss);
  }
  return events;
}

void write_compact(const std::string& path, const std::vector<Event>& events) {
  ArtifactWriter writer(path, ArtifactHeader{}, {.layout = ArtifactLayout::Compact, .frame_events = 4, .flush_interval = {}});
  writer.append(events);
  writer.finish(ArtifactTrailer{});
}

bool same(const Event& a, const Event& b) {
  return a.type == b.type && a.pid == b.pid && a.tid == b.tid && a.timestamp == b.timestamp && a.addr == b.addr &&
         a.old_addr == b.old_addr && a.size == b.size && a.stack_hash == b.stack_hash;
}

TEST(HeapRuns, EveryEventReadsBackWithTimesInTicks) {
  TempDir dir;
  const std::vector<Event> events = mixed_events();
  write_compact(dir.file("a"), events);
  ReadBack back = read_back(dir.file("a"));
  ASSERT_FALSE(back.result.error) << *back.result.error;
  EXPECT_EQ(back.result.header.format_version, kFormatVersion);
  ASSERT_EQ(back.events.size(), events.size());
  EXPECT_GT(back.result.stats.frames, 10u);
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(back.events[i].type, events[i].type) << i;
    EXPECT_EQ(back.events[i].tid, events[i].tid) << i;
    EXPECT_EQ(back.events[i].size, events[i].size) << i;
    const bool heap = is_allocation(events[i].type) || events[i].type == EventType::Free;
    EXPECT_EQ(back.events[i].timestamp, heap ? events[i].timestamp / 10'000 * 10'000 : events[i].timestamp) << i;
  }
}

// The writer's live heap (what record --snapshot-when heap>= watches) follows
// the blocks as HeapReplay does: frees, reallocs, a reused address, a fork's
// copy, exec and exit; flush() puts every event appended into the file.
TEST(HeapRuns, LiveBytesFollowTheBlocksAndFlushWritesThemAll) {
  TempDir dir;
  ArtifactWriter writer(dir.file("a"), ArtifactHeader{}, {.layout = ArtifactLayout::Compact, .flush_interval = {}});
  auto live_after = [&](Event event) {
    writer.append(event);
    return writer.live_heap_bytes();
  };
  EXPECT_EQ(live_after(alloc_event(EventType::Malloc, 4242, 1000, 0xa000, 100)), 100u);
  EXPECT_EQ(live_after(alloc_event(EventType::Calloc, 4242, 2000, 0xb000, 50)), 150u);
  EXPECT_EQ(live_after(alloc_event(EventType::Free, 4242, 3000, 0xa000, 0)), 50u);
  EXPECT_EQ(live_after(alloc_event(EventType::Free, 4242, 3100, 0xdead, 0)), 50u) << "a block never seen";
  Event realloc = alloc_event(EventType::Realloc, 4242, 4000, 0xc000, 70);
  realloc.old_addr = 0xb000;
  EXPECT_EQ(live_after(realloc), 70u);
  EXPECT_EQ(live_after(alloc_event(EventType::Malloc, 4242, 5000, 0xc000, 30)), 30u) << "the live block replaced";
  Event fork;
  fork.type = EventType::Fork;
  fork.pid = fork.tid = 4243;
  fork.parent_pid = 4242;
  fork.timestamp = 6000;
  EXPECT_EQ(live_after(fork), 60u) << "the child's copy";
  Event exec = fork;
  exec.type = EventType::Exec;
  exec.timestamp = 7000;
  EXPECT_EQ(live_after(exec), 30u);
  Event exit = alloc_event(EventType::Exit, 4242, 8000, 0, 0);
  EXPECT_EQ(live_after(exit), 0u);
  EXPECT_EQ(live_after(alloc_event(EventType::Malloc, 4242, 12345, 0, 10)), 0u) << "a failed allocation";

  writer.flush();
  EXPECT_EQ(read_back(writer.file_path()).events.size(), 10u) << "every event in the file before finish";
  writer.finish(ArtifactTrailer{});
}

TEST(HeapRuns, TruncationAtEveryByteOffsetReadsTheCompleteFramesAlike) {
  TempDir dir;
  write_compact(dir.file("a"), mixed_events());
  const Bytes file = read_bytes(dir.file("a"));
  const std::vector<Event> whole = read_back(dir.file("a")).events;
  for (size_t cut = 0; cut < file.size(); cut += 3) {
    write_bytes(dir.file("cut"), Bytes(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(cut)));
    std::vector<Event> events;
    try {
      read_artifact(dir.file("cut"), [&](const Event& e) { events.push_back(e); });
    } catch (const std::runtime_error&) {
      continue;  // no complete header: named, nothing to read
    }
    ASSERT_LE(events.size(), whole.size()) << "cut at " << cut;
    for (size_t i = 0; i < events.size(); ++i) ASSERT_TRUE(same(events[i], whole[i])) << "cut at " << cut << ", event " << i;
  }
}

TEST(HeapRuns, ADamagedFrameCostsItsOwnEventsOnly) {
  TempDir dir;
  write_compact(dir.file("a"), mixed_events());
  Bytes file = read_bytes(dir.file("a"));
  const std::vector<Event> whole = read_back(dir.file("a")).events;
  const std::vector<FrameSpan> frames = split_frames(file);
  ASSERT_GT(frames.size(), 6u);
  const FrameSpan& middle = frames[frames.size() / 2];
  file[middle.offset + middle.size / 2] ^= 0x40;
  write_bytes(dir.file("damaged"), file);
  ReadBack back = read_back(dir.file("damaged"));
  ASSERT_TRUE(back.result.error) << "the damage is named";
  EXPECT_EQ(back.result.stats.damaged_frames, 1u);
  ASSERT_LT(back.events.size(), whole.size());
  // Everything before the damaged frame is as in the whole file.
  size_t i = 0;
  while (i < back.events.size() && same(back.events[i], whole[i])) ++i;
  EXPECT_GT(i, 0u);
  // After it, every event of the later frames is there, in order, with its
  // type, thread, size and time (a free's block may be unknown now).
  size_t lost = whole.size() - back.events.size();
  for (size_t j = i; j < back.events.size(); ++j) {
    const Event& want = whole[j + lost];
    EXPECT_EQ(back.events[j].type, want.type) << j;
    EXPECT_EQ(back.events[j].tid, want.tid) << j;
    EXPECT_EQ(back.events[j].size, want.size) << j;
    EXPECT_EQ(back.events[j].timestamp, want.timestamp) << j;
  }
}

// A block takes 8 bytes in the writer's table, its number 40 bits of them:
// the block past the last number is refused with a clear error before any
// byte of it is written, and the run so far stays whole.
TEST(HeapRuns, TheBlockPastTheLastNumberIsRefusedAndTheRunStaysWhole) {
  records::HeapRunEncoder encoder(records::HeapRunEncoder::kMaxBlockNumber - 1);
  Event malloc_event;
  malloc_event.type = EventType::Malloc;
  malloc_event.pid = 7;
  malloc_event.tid = 7;
  malloc_event.timestamp = 1'000'000;
  malloc_event.addr = 0x1000;
  malloc_event.size = 32;
  encoder.add(malloc_event);
  const size_t run_bytes = encoder.run_bytes();
  Event next = malloc_event;
  next.addr = 0x2000;
  try {
    encoder.add(next);
    ADD_FAILURE() << "a block numbered 2^40 was accepted";
  } catch (const std::length_error& e) {
    EXPECT_NE(std::string(e.what()).find("--aggregate"), std::string::npos) << e.what();
  }
  EXPECT_EQ(encoder.run_bytes(), run_bytes);
  EXPECT_EQ(encoder.live_blocks(), 1u);
  EXPECT_EQ(encoder.live_bytes(), 32u);
}

}  // namespace
}  // namespace memtrack::test
