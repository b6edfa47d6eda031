// Writing then reading artifacts: every record kind, framing, worker counts,
// the exact seed-compatible bytes, and the writer's bounds.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <thread>

#include "format/artifact.h"
#include "format_test_support.h"

namespace memtrack::test {
namespace {

constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();
constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();
constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();

Event lifecycle_event(EventType type, int32_t pid, uint64_t timestamp) {
  Event event;
  event.type = type;
  event.pid = pid;
  event.tid = pid;
  event.timestamp = timestamp;
  return event;
}

// One of every type, every field set, extremes included.
std::vector<Event> every_kind_of_event() {
  std::vector<Event> events;
  events.push_back(alloc_event(EventType::Malloc, 1, 10, 0x7f00'0000'1000, 16));
  events.push_back(alloc_event(EventType::Calloc, 2, 11, kMax64, kMax64));
  events.push_back(alloc_event(EventType::AlignedAlloc, kMax32, kMax64, 0x1000, 4096));
  Event realloc_moved = alloc_event(EventType::Realloc, 3, 12, 0x2000, 64);
  realloc_moved.old_addr = kMax64;
  events.push_back(realloc_moved);
  events.push_back(alloc_event(EventType::Realloc, 3, 13, 0x3000, 128));  // realloc(NULL, 128)
  events.push_back(alloc_event(EventType::Free, 3, 14, 0x3000, 0));
  events.push_back(alloc_event(EventType::Free, 3, 15, 0, 0));  // free(NULL)
  Event fork = lifecycle_event(EventType::Fork, 5001, 16);
  fork.parent_pid = 4242;
  events.push_back(fork);
  Event exec = lifecycle_event(EventType::Exec, 5001, 17);
  exec.image = std::make_shared<const ProcessImage>(
      ProcessImage{"/usr/bin/python3", "python3", {"python3", "-c", "print('héllo')", ""}});
  events.push_back(exec);
  Event exec_path_only = lifecycle_event(EventType::Exec, 5002, 18);
  exec_path_only.image = std::make_shared<const ProcessImage>(ProcessImage{"/bin/true", "", {}});
  events.push_back(exec_path_only);
  Event exit = lifecycle_event(EventType::Exit, 5001, 19);
  exit.exit_code = kMin32;
  events.push_back(exit);
  Event negative_ids = lifecycle_event(EventType::Exit, kMin32, 20);
  negative_ids.tid = -1;
  negative_ids.exit_code = 256;
  events.push_back(negative_ids);
  MappingInfo by_build_id;
  by_build_id.len = 0x1000;
  by_build_id.file_offset = kMax64;
  by_build_id.build_id = {0x00, 0xff, 0x10, 0x20};
  by_build_id.prot = 5;
  by_build_id.path = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  by_build_id.new_image = true;
  Event mapping = lifecycle_event(EventType::Mapping, 5001, 21);
  mapping.addr = kMax64 - 0xfff;
  mapping.mapping = std::make_shared<const MappingInfo>(by_build_id);
  events.push_back(mapping);
  MappingInfo by_inode;
  by_inode.len = kMax64;
  by_inode.file_offset = 0x1000;
  by_inode.dev = (uint64_t{259} << 20) | 1;
  by_inode.ino = kMax64;
  by_inode.prot = 4;
  by_inode.path = "/tmp/x (deleted)";
  mapping.timestamp = 22;
  mapping.addr = 0x5555'0000'1000;
  mapping.mapping = std::make_shared<const MappingInfo>(by_inode);
  events.push_back(mapping);
  Event interposed = lifecycle_event(EventType::Interposed, 5001, 23);
  interposed.tid = 5003;
  events.push_back(interposed);
  return events;
}

TEST(ArtifactRoundtrip, EveryEventTypeAndField) {
  TempDir dir;
  std::vector<Event> events = every_kind_of_event();
  write_artifact(dir.file("a.memtrack"), events);

  ReadBack back = read_back(dir.file("a.memtrack"));
  EXPECT_EQ(back.events, events);
  EXPECT_FALSE(back.result.error);
  EXPECT_TRUE(back.result.warnings.empty()) << back.result.warnings.front();
  EXPECT_EQ(back.result.stats.events, events.size());
  EXPECT_EQ(back.result.stats.skipped_records, 0u);
}

TEST(ArtifactRoundtrip, ExecWithoutImageReadsBackAsEmptyImage) {
  TempDir dir;
  write_artifact(dir.file("a.memtrack"), {lifecycle_event(EventType::Exec, 7, 1)});

  ReadBack back = read_back(dir.file("a.memtrack"));
  ASSERT_EQ(back.events.size(), 1u);
  ASSERT_TRUE(back.events[0].image);
  EXPECT_TRUE(back.events[0].image->path.empty());
  EXPECT_TRUE(back.events[0].image->comm.empty());
  EXPECT_TRUE(back.events[0].image->argv.empty());
}

TEST(ArtifactRoundtrip, FieldsForeignToTheTypeAreNotStored) {
  TempDir dir;
  Event free_with_junk = alloc_event(EventType::Free, 1, 2, 0x10, 99);
  free_with_junk.old_addr = 5;
  free_with_junk.parent_pid = 6;
  free_with_junk.exit_code = 7;
  free_with_junk.image = std::make_shared<const ProcessImage>(ProcessImage{"/x", "x", {"x"}});
  write_artifact(dir.file("a.memtrack"), {free_with_junk});

  ReadBack back = read_back(dir.file("a.memtrack"));
  ASSERT_EQ(back.events.size(), 1u);
  EXPECT_EQ(back.events[0], alloc_event(EventType::Free, 1, 2, 0x10, 0));
}

TEST(ArtifactRoundtrip, HeaderAndTrailer) {
  TempDir dir;
  ArtifactHeader header;
  header.features = {"alloc-events", "process-tree"};
  header.recorder_version = "memtrack 0.1.0";
  header.command = {"./bench", "--iterations", "3"};
  header.host = "builder";
  header.kernel = "6.1.0-18-amd64";
  header.start_monotonic_ns = kMax64;
  header.start_realtime_ns = 1'700'000'000'000'000'000;
  header.page_size = 4096;
  header.kernel_fallbacks = {"uprobes: classic perf uprobes, one per function (no uprobe sessions before Linux 6.13)",
                             "rss: statm"};
  ArtifactTrailer trailer;
  trailer.counters = {{"alloc_events_lost", 3}, {"huge", kMax64}, {"zero", 0}};
  trailer.events = 12345;  // the writer replaces these two with what it wrote
  trailer.frames = 678;
  trailer.end_monotonic_ns = 99;
  trailer.exit_status = -2;
  {
    ArtifactWriter writer(dir.file("a.memtrack"), header, {.frame_events = 2, .flush_interval = {}});
    writer.append(every_kind_of_event());
    writer.finish(trailer);
  }

  ReadBack back = read_back(dir.file("a.memtrack"));
  header.format_version = kRecordsFormatVersion;  // the writer's layout gives it
  EXPECT_EQ(back.result.header, header);
  ASSERT_TRUE(back.result.trailer);
  trailer.events = every_kind_of_event().size();
  trailer.frames = (trailer.events + 1) / 2;
  EXPECT_EQ(*back.result.trailer, trailer);
  EXPECT_TRUE(back.result.warnings.empty()) << back.result.warnings.front();
}

TEST(ArtifactRoundtrip, SmallFramesKeepOrder) {
  TempDir dir;
  std::vector<Event> events = random_events(100, 1);
  write_artifact(dir.file("a.memtrack"), events, {.frame_events = 3, .flush_interval = {}});

  ReadBack back = read_back(dir.file("a.memtrack"));
  EXPECT_EQ(back.events, events);
  EXPECT_EQ(back.result.stats.frames, 34u);
  ASSERT_TRUE(back.result.trailer);
  EXPECT_EQ(back.result.trailer->frames, 34u);
  EXPECT_EQ(back.result.trailer->events, 100u);
  // header, 34 event frames, trailer
  EXPECT_EQ(split_frames(read_bytes(dir.file("a.memtrack"))).size(), 36u);
}

TEST(ArtifactRoundtrip, WorkerCountDoesNotChangeTheFile) {
  TempDir dir;
  std::vector<Event> events = random_events(5000, 2);
  write_artifact(dir.file("one.memtrack"), events, {.workers = 1, .frame_events = 7, .flush_interval = {}});
  write_artifact(dir.file("four.memtrack"), events, {.workers = 4, .frame_events = 7, .flush_interval = {}});

  EXPECT_EQ(read_bytes(dir.file("one.memtrack")), read_bytes(dir.file("four.memtrack")));
  ReadBack four = read_back(dir.file("four.memtrack"));
  EXPECT_EQ(four.events, events);
  EXPECT_EQ(four.result.stats.frames, (5000u + 6) / 7);
}

TEST(ArtifactRoundtrip, SpansOfAnySizeGiveTheSameFile) {
  TempDir dir;
  std::vector<Event> events = random_events(1000, 3);
  write_artifact(dir.file("whole.memtrack"), events, {.frame_events = 64, .flush_interval = {}});
  {
    ArtifactWriter writer(dir.file("pieces.memtrack"), ArtifactHeader{}, {.frame_events = 64, .flush_interval = {}});
    size_t i = 0;
    for (size_t piece = 1; i < events.size(); piece = piece * 3 % 101) {
      size_t count = std::min(piece, events.size() - i);
      writer.append(std::span<const Event>(events).subspan(i, count));
      i += count;
    }
    writer.finish(ArtifactTrailer{});
  }
  EXPECT_EQ(read_bytes(dir.file("whole.memtrack")), read_bytes(dir.file("pieces.memtrack")));
}

TEST(ArtifactRoundtrip, EmptyArtifactIsValid) {
  TempDir dir;
  write_artifact(dir.file("a.memtrack"), {});

  ReadBack back = read_back(dir.file("a.memtrack"));
  EXPECT_TRUE(back.events.empty());
  EXPECT_FALSE(back.result.error);
  EXPECT_TRUE(back.result.warnings.empty());
  ASSERT_TRUE(back.result.trailer);
  EXPECT_EQ(back.result.trailer->events, 0u);
  EXPECT_EQ(back.result.trailer->frames, 0u);
  EXPECT_EQ(split_frames(read_bytes(dir.file("a.memtrack"))).size(), 2u);  // header + trailer
}

TEST(ArtifactRoundtrip, DestructorFinishesWithADefaultTrailer) {
  TempDir dir;
  std::vector<Event> events = random_events(10, 4);
  {
    ArtifactWriter writer(dir.file("a.memtrack"), ArtifactHeader{}, {.frame_events = 4, .flush_interval = {}});
    writer.publish();
    writer.append(events);
  }
  ReadBack back = read_back(dir.file("a.memtrack"));
  EXPECT_EQ(back.events, events);
  ASSERT_TRUE(back.result.trailer);
  EXPECT_EQ(back.result.trailer->events, 10u);
  EXPECT_EQ(back.result.trailer->frames, 3u);
  EXPECT_TRUE(back.result.warnings.empty());
}

// Counts what it is given; its state: `state_bytes` bytes of a pattern.
class CountingAggregator final : public EventAggregator {
 public:
  explicit CountingAggregator(size_t state_bytes) : state_bytes_(state_bytes) {}
  void add(const Event& event) override { added.push_back(event); }
  uint64_t live_bytes() const override { return 0; }
  std::vector<uint8_t> state() const override {
    std::vector<uint8_t> state(state_bytes_);
    for (size_t i = 0; i < state.size(); ++i) state[i] = static_cast<uint8_t>(i * 7 + i / 251);
    return state;
  }
  std::vector<Event> added;

 private:
  size_t state_bytes_;
};

TEST(ArtifactRoundtrip, AnAggregatedArtifactKeepsTheOtherRecordsAndItsStateInParts) {
  TempDir dir;
  std::vector<Event> events = random_events(2000, 5);
  for (size_t i = 0; i < events.size(); i += 100)
    events.insert(events.begin() + i, lifecycle_event(EventType::Exit, static_cast<int32_t>(i), events[i].timestamp));
  auto aggregator = std::make_shared<CountingAggregator>(2 * kAggregatePartBytes + 5);
  write_artifact(dir.file("a.memtrack"), events, {.frame_events = 64, .flush_interval = {}, .aggregator = aggregator});
  EXPECT_EQ(aggregator->added, events);

  std::vector<Event> read;
  std::vector<AggregatePart> parts;
  std::vector<uint8_t> state;
  ReadResult result = read_artifact(
      dir.file("a.memtrack"), [&](const Event& e) { read.push_back(e); }, {},
      [&](const AggregatePart& part) {
        parts.push_back(part);
        state.insert(state.end(), part.state.begin(), part.state.end());
      });
  EXPECT_FALSE(result.error);
  EXPECT_TRUE(result.warnings.empty()) << result.warnings[0];  // the trailer counts the parts
  std::vector<Event> kept;
  for (const Event& e : events)
    if (kept_when_aggregated(e.type)) kept.push_back(e);
  ASSERT_GT(kept.size(), 0u);
  ASSERT_LT(kept.size(), events.size());
  EXPECT_EQ(read, kept);
  ASSERT_EQ(parts.size(), 3u);
  for (uint32_t i = 0; i < parts.size(); ++i) {
    EXPECT_EQ(parts[i].part, i);
    EXPECT_EQ(parts[i].parts, 3u);
  }
  EXPECT_EQ(state, aggregator->state());
  EXPECT_EQ(result.stats.aggregate_parts, 3u);
  const std::vector<std::string>& features = result.header.features;
  EXPECT_NE(std::find(features.begin(), features.end(), kAggregatedFeature), features.end());
}

// While recording goes on, the state so far replaces OUTPUT.checkpoint (a
// small artifact of the same header and its Aggregate records) every
// checkpoint_interval; the complete artifact removes it and counts them.
TEST(ArtifactRoundtrip, AnAggregatedArtifactKeepsACheckpointUntilItIsComplete) {
  TempDir dir;
  const std::string path = dir.file("a.memtrack");
  auto aggregator = std::make_shared<CountingAggregator>(1000);
  ArtifactHeader header;
  header.command = {"fixture"};
  header.start_monotonic_ns = 42;
  ArtifactWriter writer(path, header,
                        {.flush_interval = {}, .aggregator = aggregator, .checkpoint_interval = std::chrono::milliseconds(20)});
  writer.publish();
  writer.append(random_events(100, 3));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!std::filesystem::exists(checkpoint_path(path)) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(std::filesystem::exists(checkpoint_path(path)));
  std::vector<uint8_t> state;
  ReadResult checkpoint = read_artifact(
      checkpoint_path(path), [](const Event&) {}, {},
      [&](const AggregatePart& part) { state.insert(state.end(), part.state.begin(), part.state.end()); });
  EXPECT_FALSE(checkpoint.error);
  EXPECT_EQ(checkpoint.header.command, header.command);
  EXPECT_EQ(checkpoint.header.start_monotonic_ns, 42u);
  ASSERT_TRUE(checkpoint.trailer);
  EXPECT_GT(checkpoint.trailer->end_monotonic_ns, 0u);
  EXPECT_EQ(state, aggregator->state());

  writer.finish(ArtifactTrailer{});
  EXPECT_FALSE(std::filesystem::exists(checkpoint_path(path)));
  ReadResult whole = read_artifact(path, [](const Event&) {}, {}, [](const AggregatePart&) {});
  ASSERT_TRUE(whole.trailer);
  EXPECT_GE(whole.trailer->counters.at("checkpoints_written"), 1u);
  EXPECT_EQ(whole.trailer->counters.at("checkpoints_failed"), 0u);
}

TEST(ArtifactRoundtrip, LargeExecImagesSplitFramesBelowTheLimit) {
  TempDir dir;
  // 24 records of 4 MiB each: each is more than half kTargetFrameBytes, so
  // each gets a frame of its own although frame_events would allow all of
  // them in one; a 20 MiB record, above the target but below the limit, too.
  auto image = std::make_shared<const ProcessImage>(
      ProcessImage{"/bin/sh", "sh", {std::string(4 << 20, 'a')}});
  std::vector<Event> events;
  for (int i = 0; i < 24; ++i) {
    Event exec = lifecycle_event(EventType::Exec, 100 + i, static_cast<uint64_t>(i));
    exec.image = image;
    events.push_back(exec);
  }
  Event huge = lifecycle_event(EventType::Exec, 200, 24);
  huge.image = std::make_shared<const ProcessImage>(ProcessImage{"/bin/sh", "sh", {std::string(20 << 20, 'b')}});
  events.push_back(huge);
  write_artifact(dir.file("a.memtrack"), events);

  size_t matching = 0;
  ReadResult result = read_artifact(
      dir.file("a.memtrack"), [&](const Event& event) { matching += event == events[matching]; });
  EXPECT_EQ(matching, events.size());
  EXPECT_FALSE(result.error) << *result.error;
  EXPECT_EQ(result.stats.frames, 25u);
}

TEST(ArtifactWriter, RejectsAnEventLargerThanAFrame) {
  TempDir dir;
  ArtifactWriter writer(dir.file("a.memtrack"), ArtifactHeader{});
  Event exec = lifecycle_event(EventType::Exec, 1, 1);
  exec.image = std::make_shared<const ProcessImage>(
      ProcessImage{"/bin/sh", "sh", {std::string(kMaxFrameBytes, 'a')}});
  EXPECT_THROW(writer.append(exec), std::invalid_argument);
  writer.append(lifecycle_event(EventType::Exit, 1, 2));  // still usable
  writer.finish(ArtifactTrailer{});
  EXPECT_EQ(read_back(dir.file("a.memtrack")).events.size(), 1u);
}

TEST(ArtifactWriter, MisuseThrows) {
  TempDir dir;
  EXPECT_THROW(ArtifactWriter(dir.file("a"), ArtifactHeader{}, {.workers = 0}),
               std::invalid_argument);
  EXPECT_THROW(ArtifactWriter(dir.file("b"), ArtifactHeader{}, {.frame_events = 0, .flush_interval = {}}),
               std::invalid_argument);
  EXPECT_THROW(ArtifactWriter(dir.file("c"), ArtifactHeader{}, {.zstd_level = 1000}),
               std::invalid_argument);
  ArtifactWriter writer(dir.file("d"), ArtifactHeader{});
  writer.finish(ArtifactTrailer{});
  EXPECT_THROW(writer.append(Event{}), std::logic_error);
  EXPECT_THROW(writer.finish(ArtifactTrailer{}), std::logic_error);
}

TEST(ArtifactWriter, UncreatableFileThrowsNamingThePath) {
  TempDir dir;
  std::string path = dir.file("no-such-dir/a.memtrack");
  try {
    ArtifactWriter writer(path, ArtifactHeader{});
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// A failing frame write on a worker thread reaches the caller.
TEST(ArtifactWriter, FrameWriteErrorsSurface) {
  TempDir dir;
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto previous_handler = std::signal(SIGXFSZ, SIG_IGN);  // get EFBIG instead
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string path = dir.file("a.memtrack");
  std::string message;
  try {
    ArtifactWriter writer(path, ArtifactHeader{}, {.workers = 2, .frame_events = 100, .flush_interval = {}});
    writer.append(random_events(10'000, 8));  // far more than 4 KiB
    writer.finish(ArtifactTrailer{});
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previous_handler);
  EXPECT_NE(message.find(path + ": write failed"), std::string::npos) << message;
}

TEST(ArtifactWriter, StatsCountWhatWasWritten) {
  TempDir dir;
  std::vector<Event> events = random_events(1000, 5);
  ArtifactWriter writer(dir.file("a.memtrack"), ArtifactHeader{},
                        {.workers = 2, .frame_events = 100, .flush_interval = {}});
  writer.append(events);
  writer.finish(ArtifactTrailer{});
  WriterStats stats = writer.stats();
  EXPECT_EQ(stats.events, 1000u);
  EXPECT_EQ(stats.frames, 10u);
  EXPECT_EQ(stats.bytes, std::filesystem::file_size(dir.file("a.memtrack")));
  EXPECT_GE(stats.peak_frames_in_flight, 1u);
  EXPECT_LE(stats.peak_frames_in_flight, 2u);
}

// What a zstd context holds after compressing `input_bytes` at `level`.
size_t cctx_bytes(int level, size_t input_bytes) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
  std::vector<char> input(input_bytes, 'x'), output(ZSTD_compressBound(input_bytes));
  ZSTD_compress2(cctx, output.data(), output.size(), input.data(), input.size());
  size_t bytes = ZSTD_sizeof_CCtx(cctx);
  ZSTD_freeCCtx(cctx);
  return bytes;
}

// The writer's memory depends on workers and frame size, not on run length:
// 300 frames of events would be over 20 MB if the writer kept them.
TEST(ArtifactWriter, MemoryIsBoundedIndependentOfRunLength) {
  TempDir dir;
  constexpr unsigned kWorkers = 2;
  constexpr size_t kFrameEvents = 1000;
  WriterOptions options{.workers = kWorkers, .frame_events = kFrameEvents, .flush_interval = {}};
  ArtifactWriter writer(dir.file("a.memtrack"), ArtifactHeader{}, options);
  std::vector<Event> frame_worth = random_events(kFrameEvents, 6);
  for (int i = 0; i < 300; ++i) writer.append(frame_worth);
  writer.finish(ArtifactTrailer{});

  // Frame buffers: the one being filled plus one in flight per worker, each a
  // frame's packed records (at most 128 bytes an event) with up to 2x growth
  // headroom. Per worker: the compressed frame, with its headroom, and a
  // zstd context.
  size_t packed = 2 * kFrameEvents * 128;
  size_t frame_buffers = (kWorkers + 1) * packed;
  size_t per_worker = 2 * ZSTD_compressBound(packed) + cctx_bytes(options.zstd_level, packed);
  WriterStats stats = writer.stats();
  EXPECT_EQ(stats.events, 300 * kFrameEvents);
  // It does count the frames: a packed record is over 32 bytes (its keys alone).
  EXPECT_GT(stats.buffer_bytes, cctx_bytes(options.zstd_level, packed) + kFrameEvents * 32);
  EXPECT_LE(stats.buffer_bytes, frame_buffers + kWorkers * per_worker);
  EXPECT_LE(stats.peak_frames_in_flight, kWorkers);
}

// Seed compatibility: rmp-serde's flattened maps, byte for byte.
TEST(ArtifactLayout, EventRecordsAreSeedCompatible) {
  TempDir dir;
  Event malloc_event = seed_malloc_event();
  Event realloc_from_null = alloc_event(EventType::Realloc, 1, 2, 3, 300);
  realloc_from_null.pid = 1;
  write_artifact(dir.file("a.memtrack"), {malloc_event, realloc_from_null});

  Bytes file = read_bytes(dir.file("a.memtrack"));
  std::vector<FrameSpan> frames = split_frames(file);
  ASSERT_EQ(frames.size(), 3u);
  Bytes content = decompress_frame(file, frames[1]);
  Bytes expected = seed_malloc_bytes();
  // clang-format off
  append(expected, {
      // realloc(NULL, 300): no old_addr key at all
      0x86,
      0xa3, 'p', 'i', 'd', 0x01,
      0xa3, 't', 'i', 'd', 0x01,
      0xa9, 't', 'i', 'm', 'e', 's', 't', 'a', 'm', 'p', 0x02,
      0xa4, 'a', 'd', 'd', 'r', 0x03,
      0xa4, 't', 'y', 'p', 'e', 0xa7, 'R', 'e', 'a', 'l', 'l', 'o', 'c',
      0xa4, 's', 'i', 'z', 'e', 0xcd, 0x01, 0x2c,
  });
  // clang-format on
  EXPECT_EQ(content, expected);
}

TEST(ArtifactLayout, HeaderAndTrailerAreSkippableFramesOfStringKeyedMaps) {
  TempDir dir;
  write_artifact(dir.file("a.memtrack"), random_events(5, 7), {.frame_events = 2, .flush_interval = {}});
  Bytes file = read_bytes(dir.file("a.memtrack"));
  std::vector<FrameSpan> frames = split_frames(file);
  ASSERT_EQ(frames.size(), 5u);

  // Decoded with msgpack-cxx, independently of the reader under test.
  auto keys_and_record = [&](const FrameSpan& span) {
    EXPECT_TRUE(span.skippable);
    EXPECT_EQ(file[span.offset], 0x50);  // magic 0x184D2A50, little-endian
    EXPECT_EQ(file[span.offset + 3], 0x18);
    msgpack::object_handle handle = msgpack::unpack(
        reinterpret_cast<const char*>(file.data() + span.offset + 8), span.size - 8);
    std::vector<std::string> keys;
    std::string record;
    for (const auto& [key, value] : handle.get().as<std::map<std::string, msgpack::object>>()) {
      keys.push_back(key);
      if (key == "record") record = value.as<std::string>();
    }
    return std::pair(keys, record);
  };
  auto [header_keys, header_record] = keys_and_record(frames.front());
  EXPECT_EQ(header_record, "memtrack-header");
  EXPECT_EQ(header_keys,
            (std::vector<std::string>{"clock", "command", "crc32", "features", "format_version", "host",
                                      "kernel", "magic", "page_size", "record", "recorder_version",
                                      "start_monotonic_ns", "start_realtime_ns"}));
  auto [trailer_keys, trailer_record] = keys_and_record(frames.back());
  EXPECT_EQ(trailer_record, "memtrack-trailer");
  EXPECT_EQ(trailer_keys, (std::vector<std::string>{"counters", "crc32", "end_monotonic_ns", "events",
                                                    "exit_status", "frames", "record"}));
  for (size_t i = 1; i + 1 < frames.size(); ++i) EXPECT_FALSE(frames[i].skippable);
}

}  // namespace
}  // namespace memtrack::test
