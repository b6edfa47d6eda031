// What the artifact survives: damage to its header and trailer (CRC32),
// duplicated, missing or reordered frames (sequence markers), planted
// symlinks and typos at the output name (exclusive temporary file, renamed
// into place), a killed writer (frames closed every flush_interval), and
// write errors at every write of a recording (fault injection).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "format/artifact.h"
#include "format_test_support.h"

namespace memtrack::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr size_t kMarkerBytes = records::kFrameMarkerBytes;

bool has_warning(const ReadResult& result, const std::string& part) {
  return std::any_of(result.warnings.begin(), result.warnings.end(),
                     [&](const std::string& w) { return w.find(part) != std::string::npos; });
}

// Damage the reader noticed: an exception, an error or a warning.
bool detected(const std::string& path) {
  try {
    ReadBack back = read_back(path);
    return back.result.error || !back.result.warnings.empty();
  } catch (const std::runtime_error&) {
    return true;
  }
}

struct Recording {
  std::vector<Event> events;
  Bytes file;
  std::vector<FrameSpan> frames;  // header, event frames, trailer
  static constexpr size_t kFrameEvents = 5;
};

Recording record_small(const TempDir& dir) {
  Recording r;
  r.events = random_events(20, 3);  // 4 event frames
  ArtifactTrailer trailer;
  trailer.counters = {{"kernel_events_lost", 0}, {"alloc_events_lost", 0}};
  ArtifactWriter writer(dir.file("source"), ArtifactHeader{},
                        {.frame_events = Recording::kFrameEvents, .flush_interval = {}});
  writer.append(r.events);
  writer.finish(trailer);
  r.file = read_bytes(dir.file("source"));
  r.frames = split_frames(r.file);
  return r;
}

Bytes without(const Bytes& file, size_t offset, size_t size) {
  Bytes out = file;
  out.erase(out.begin() + static_cast<std::ptrdiff_t>(offset),
            out.begin() + static_cast<std::ptrdiff_t>(offset + size));
  return out;
}

size_t find_bytes(const Bytes& file, std::string_view text, size_t from = 0) {
  auto at = std::search(file.begin() + static_cast<std::ptrdiff_t>(from), file.end(), text.begin(), text.end(),
                        [](uint8_t byte, char c) { return byte == static_cast<uint8_t>(c); });
  return static_cast<size_t>(at - file.begin());
}

TEST(ArtifactIntegrity, IntactRecordingHasNoWarnings) {
  TempDir dir;
  Recording r = record_small(dir);
  ReadBack back = read_back(dir.file("source"));
  EXPECT_EQ(back.events, r.events);
  EXPECT_FALSE(back.result.error);
  EXPECT_TRUE(back.result.warnings.empty()) << back.result.warnings.front();
  EXPECT_EQ(back.result.header.format_version, 2u);
}

// Issue 9, item 7: the trailer's kernel_events_lost changed from 0 to 5.
TEST(ArtifactIntegrity, ChangedTrailerCounterIsDetected) {
  TempDir dir;
  Recording r = record_small(dir);
  Bytes file = r.file;
  size_t key = find_bytes(file, "kernel_events_lost", r.frames.back().offset);
  ASSERT_LT(key, file.size());
  size_t value = key + std::strlen("kernel_events_lost");
  ASSERT_EQ(file[value], 0x00);  // positive fixint 0
  file[value] = 0x05;
  write_bytes(dir.file("edited"), file);
  ReadBack back = read_back(dir.file("edited"));
  ASSERT_TRUE(back.result.trailer);
  EXPECT_EQ(back.result.trailer->counters.at("kernel_events_lost"), 5u);
  EXPECT_TRUE(has_warning(back.result, "the trailer's checksum does not match"))
      << ::testing::PrintToString(back.result.warnings);
}

// Issue 9, item 7: the trailer's counters removed (the map emptied, the
// frame length fixed up), with or without the checksum entry.
TEST(ArtifactIntegrity, RemovedTrailerCountersAreDetected) {
  TempDir dir;
  Recording r = record_small(dir);
  const FrameSpan& trailer = r.frames.back();
  size_t counters = find_bytes(r.file, "counters", trailer.offset) + std::strlen("counters");
  ASSERT_EQ(r.file[counters], 0x82);  // fixmap of 2
  size_t events_key = find_bytes(r.file, "\xa6" "events", counters);
  size_t removed = events_key - counters - 1;
  Bytes file = without(r.file, counters + 1, removed);
  file[counters] = 0x80;
  uint32_t length = static_cast<uint32_t>(trailer.size - records::kSkippableHeaderBytes - removed);
  for (int b = 0; b < 4; ++b) file[trailer.offset + 4 + b] = static_cast<uint8_t>(length >> (8 * b));
  write_bytes(dir.file("no-counters"), file);
  ReadBack back = read_back(dir.file("no-counters"));
  ASSERT_TRUE(back.result.trailer);
  EXPECT_TRUE(back.result.trailer->counters.empty());
  EXPECT_TRUE(has_warning(back.result, "the trailer's checksum does not match"));

  // The checksum entry (the last 11 bytes) cut off as well.
  Bytes bare = without(file, file.size() - 11, 11);
  for (int b = 0; b < 4; ++b) bare[trailer.offset + 4 + b] = static_cast<uint8_t>((length - 11) >> (8 * b));
  size_t map_header = trailer.offset + records::kSkippableHeaderBytes;
  ASSERT_EQ(bare[map_header], 0x87);  // fixmap of 7 entries
  bare[map_header] = 0x86;
  write_bytes(dir.file("bare"), bare);
  back = read_back(dir.file("bare"));
  ASSERT_TRUE(back.result.trailer) << ::testing::PrintToString(back.result.warnings);
  EXPECT_TRUE(has_warning(back.result, "has no checksum")) << ::testing::PrintToString(back.result.warnings);
}

// Issue 9, item 7: 13 of 43 header flips and 24 of 43 trailer flips went
// unnoticed. Now every single-bit flip anywhere in either is.
TEST(ArtifactIntegrity, EveryBitFlipInHeaderAndTrailerIsDetected) {
  TempDir dir;
  Recording r = record_small(dir);
  const std::string path = dir.file("flipped");
  size_t undetected = 0, tried = 0;
  for (const FrameSpan* frame : {&r.frames.front(), &r.frames.back()}) {
    for (size_t at = frame->offset; at < frame->offset + frame->size; ++at) {
      for (int bit = 0; bit < 8; ++bit) {
        Bytes file = r.file;
        file[at] ^= static_cast<uint8_t>(1 << bit);
        write_bytes(path, file);
        ++tried;
        if (!detected(path)) {
          ++undetected;
          ADD_FAILURE() << "flip of bit " << bit << " at byte " << at << " went unnoticed";
        }
      }
    }
  }
  EXPECT_EQ(undetected, 0u) << "of " << tried;
  std::printf("%zu single-bit flips in the header and trailer, %zu undetected\n", tried, undetected);
}

// Issue 9, item 7: a duplicated frame is reported and its events are not
// counted twice.
TEST(ArtifactIntegrity, DuplicatedFrameIsSkippedAndReported) {
  TempDir dir;
  Recording r = record_small(dir);
  const FrameSpan& second = r.frames[2];
  size_t start = second.offset - kMarkerBytes, size = kMarkerBytes + second.size;
  Bytes file = r.file;
  file.insert(file.begin() + static_cast<std::ptrdiff_t>(start + size),
              r.file.begin() + static_cast<std::ptrdiff_t>(start),
              r.file.begin() + static_cast<std::ptrdiff_t>(start + size));
  write_bytes(dir.file("dup"), file);
  ReadBack back = read_back(dir.file("dup"));
  EXPECT_EQ(back.events, r.events);
  EXPECT_EQ(back.result.stats.duplicate_frames, 1u);
  EXPECT_TRUE(has_warning(back.result, "repeats event frame 1"));
  EXPECT_EQ(back.result.stats.frames, 4u);
}

TEST(ArtifactIntegrity, MissingAndReorderedFramesAreReported) {
  TempDir dir;
  Recording r = record_small(dir);
  const FrameSpan& second = r.frames[2];
  const FrameSpan& third = r.frames[3];
  size_t start = second.offset - kMarkerBytes;
  Bytes missing = without(r.file, start, kMarkerBytes + second.size);
  write_bytes(dir.file("missing"), missing);
  ReadBack back = read_back(dir.file("missing"));
  EXPECT_EQ(back.result.stats.missing_frames, 1u);
  EXPECT_TRUE(has_warning(back.result, "1 event frames are missing (sequence numbers 1)"))
      << ::testing::PrintToString(back.result.warnings);

  // The second and third event frames (with their markers) swapped.
  Bytes swapped(r.file.begin(), r.file.begin() + static_cast<std::ptrdiff_t>(start));
  auto piece = [&](const FrameSpan& f) {
    return Bytes(r.file.begin() + static_cast<std::ptrdiff_t>(f.offset - kMarkerBytes),
                 r.file.begin() + static_cast<std::ptrdiff_t>(f.offset + f.size));
  };
  append(swapped, piece(third));
  append(swapped, piece(second));
  swapped.insert(swapped.end(), r.file.begin() + static_cast<std::ptrdiff_t>(third.offset + third.size),
                 r.file.end());
  write_bytes(dir.file("swapped"), swapped);
  back = read_back(dir.file("swapped"));
  EXPECT_EQ(back.events.size(), r.events.size());
  EXPECT_EQ(back.result.stats.missing_frames, 0u);
  EXPECT_TRUE(has_warning(back.result, "is event frame 1, out of order (expected sequence 3)"))
      << ::testing::PrintToString(back.result.warnings);
}

// Issue 29, item 8: the second and third event frames swapped without their
// markers (each marker now precedes the other frame). Each frame is intact
// (its own checksum verifies): both are read, and the warning says what
// happened. Before, both were skipped as corrupt ("the frame's size differs
// from its marker's") and their events lost.
TEST(ArtifactIntegrity, FramesMovedApartFromTheirMarkersAreReadAndNamed) {
  TempDir dir;
  Recording r = record_small(dir);
  const FrameSpan& second = r.frames[2];
  const FrameSpan& third = r.frames[3];
  ASSERT_NE(second.size, third.size) << "the test needs two frames of different sizes";
  auto bytes = [&](size_t from, size_t to) {
    return Bytes(r.file.begin() + static_cast<std::ptrdiff_t>(from), r.file.begin() + static_cast<std::ptrdiff_t>(to));
  };
  Bytes file = bytes(0, second.offset);                                  // ... marker 1
  append(file, bytes(third.offset, third.offset + third.size));          // frame 2
  append(file, bytes(third.offset - kMarkerBytes, third.offset));        // marker 2
  append(file, bytes(second.offset, second.offset + second.size));       // frame 1
  append(file, bytes(third.offset + third.size, r.file.size()));         // frame 3, trailer
  write_bytes(dir.file("moved"), file);
  ReadBack back = read_back(dir.file("moved"));
  const size_t n = Recording::kFrameEvents;
  std::vector<Event> expected(r.events.begin(), r.events.begin() + n);
  for (size_t frame : {2, 1, 3})
    expected.insert(expected.end(), r.events.begin() + frame * n, r.events.begin() + (frame + 1) * n);
  EXPECT_EQ(back.events, expected);
  EXPECT_FALSE(back.result.error) << *back.result.error;
  EXPECT_EQ(back.result.stats.damaged_frames, 0u);
  EXPECT_TRUE(has_warning(back.result, "is not event frame 1 that its marker names"))
      << ::testing::PrintToString(back.result.warnings);
  EXPECT_TRUE(has_warning(back.result, "frames were moved apart from their markers"));
}

// A marker whose checksum matches but whose numbers cannot be (a sequence
// number beyond what the file can hold) is named for that, not as a
// checksum mismatch; the frame after it is read without a sequence number.
TEST(ArtifactIntegrity, MarkerWithImpossibleNumbersIsNamedForWhatItIs) {
  TempDir dir;
  Recording r = record_small(dir);
  const FrameSpan& second = r.frames[2];
  uint8_t marker[kMarkerBytes];
  records::write_frame_marker({1'000'000'000, static_cast<uint32_t>(second.size)}, marker);
  Bytes file = r.file;
  std::copy(std::begin(marker), std::end(marker), file.begin() + static_cast<std::ptrdiff_t>(second.offset - kMarkerBytes));
  write_bytes(dir.file("impossible"), file);
  ReadBack back = read_back(dir.file("impossible"));
  EXPECT_EQ(back.events, r.events);
  EXPECT_TRUE(has_warning(back.result, "frame marker with impossible numbers (sequence 1000000000"))
      << ::testing::PrintToString(back.result.warnings);
  EXPECT_FALSE(has_warning(back.result, "checksum does not match")) << ::testing::PrintToString(back.result.warnings);
}

// Files of format_version 1 have no markers and no checksums: read as before.
TEST(ArtifactIntegrity, VersionOneFilesNeedNoMarkersOrChecksums) {
  TempDir dir;
  msgpack::sbuffer header;
  Packer packer(header);
  packer.pack_map(3);
  pack_key(packer, "record");
  pack_key(packer, "memtrack-header");
  pack_key(packer, "magic");
  pack_key(packer, "memtrack");
  pack_key(packer, "format_version");
  packer.pack(1);
  Bytes file = skippable_frame(header);
  Event malloc_event = seed_malloc_event();
  msgpack::sbuffer content;
  Packer events(content);
  events.pack_map(6);
  pack_key(events, "pid");
  events.pack(malloc_event.pid);
  pack_key(events, "tid");
  events.pack(malloc_event.tid);
  pack_key(events, "timestamp");
  events.pack(malloc_event.timestamp);
  pack_key(events, "addr");
  events.pack(malloc_event.addr);
  pack_key(events, "type");
  pack_key(events, "Malloc");
  pack_key(events, "size");
  events.pack(malloc_event.size);
  append(file, zstd_frame(content));
  write_bytes(dir.file("v1"), file);
  ReadBack back = read_back(dir.file("v1"));
  EXPECT_EQ(back.events, std::vector<Event>{malloc_event});
  EXPECT_FALSE(back.result.error);
  // Only the missing trailer (not written here) is reported.
  EXPECT_EQ(back.result.warnings.size(), 1u) << ::testing::PrintToString(back.result.warnings);
}

// Issue 9, item 4: a symlink planted at the output name is replaced, never
// followed: the file it points to is unchanged.
TEST(ArtifactOutput, PlantedSymlinkIsReplacedNotFollowed) {
  TempDir dir;
  const std::string victim = dir.file("victim"), output = dir.file("out.zst");
  write_bytes(victim, Bytes{'k', 'e', 'e', 'p'});
  std::filesystem::create_symlink(victim, output);
  {
    ArtifactWriter writer(output, ArtifactHeader{});
    writer.append(random_events(10, 1));
    writer.finish(ArtifactTrailer{});
  }
  EXPECT_EQ(read_bytes(victim), (Bytes{'k', 'e', 'e', 'p'}));
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(output)));
  EXPECT_EQ(read_back(output).events.size(), 10u);
}

std::vector<std::string> names_in(const TempDir& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(dir.file("")).parent_path()))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Issue 9, item 5: until published, an existing file at the output name is
// untouched, and a writer dropped unpublished leaves nothing behind.
TEST(ArtifactOutput, ExistingFileSurvivesUntilPublished) {
  TempDir dir;
  const std::string precious = dir.file("precious.zst");
  write_bytes(precious, Bytes{'o', 'l', 'd'});
  {
    ArtifactWriter writer(precious, ArtifactHeader{});
    EXPECT_NE(writer.file_path(), precious);
    EXPECT_EQ(std::filesystem::path(writer.file_path()).parent_path(), std::filesystem::path(precious).parent_path());
    writer.append(random_events(10, 1));
    EXPECT_EQ(read_bytes(precious), (Bytes{'o', 'l', 'd'}));
  }  // a failed start: never published
  EXPECT_EQ(read_bytes(precious), (Bytes{'o', 'l', 'd'}));
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"precious.zst"});

  ArtifactWriter writer(precious, ArtifactHeader{});
  writer.publish();
  EXPECT_EQ(writer.file_path(), precious);
  EXPECT_FALSE(read_back(precious).result.trailer);  // the new recording, not finalized yet
  writer.finish(ArtifactTrailer{});
  EXPECT_TRUE(read_back(precious).result.trailer);
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"precious.zst"});
}

// Issue 29, item 3: two recordings to one name. The second used to rename
// its file over the first's, which went on writing into the deleted file,
// and both said they had written it. A writer holds its file's lock: the
// second is refused while the first writes, and may write there after.
TEST(ArtifactOutput, SecondWriterToAFileBeingWrittenIsRefused) {
  TempDir dir;
  const std::string path = dir.file("same.zst");
  std::vector<Event> first_events = random_events(10, 1);
  {
    ArtifactWriter first(path, ArtifactHeader{});
    first.publish();
    first.append(first_events);
    EXPECT_TRUE(artifact_being_written(path));
    try {
      ArtifactWriter second(path, ArtifactHeader{});
      ADD_FAILURE() << "a second writer was created for a file being written";
    } catch (const std::runtime_error& e) {
      EXPECT_THAT(e.what(), HasSubstr(path + ": another recording is writing this file"));
    }
    first.finish(ArtifactTrailer{});
  }
  EXPECT_EQ(read_back(path).events, first_events);
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"same.zst"}) << "the refused writer left a file";
  EXPECT_FALSE(artifact_being_written(path));
  // Finished: the name is free for the next recording.
  ArtifactWriter next(path, ArtifactHeader{});
  next.publish();
  next.finish(ArtifactTrailer{});
  EXPECT_EQ(read_back(path).events.size(), 0u);
}

// Both started before either published: the second to publish keeps its own
// name instead of replacing the first's file, whichever order they come in.
TEST(ArtifactOutput, WritersPublishingToOneNameNeverReplaceEachOther) {
  for (bool later_first : {false, true}) {
    TempDir dir;
    const std::string path = dir.file("same.zst");
    std::vector<Event> a_events = random_events(10, 1), b_events = random_events(7, 2);
    ArtifactWriter a(path, ArtifactHeader{}), b(path, ArtifactHeader{});
    ArtifactWriter& winner = later_first ? b : a;
    ArtifactWriter& other = later_first ? a : b;
    winner.publish();
    other.publish();
    EXPECT_EQ(winner.file_path(), path);
    EXPECT_NE(other.file_path(), path);
    a.append(a_events);
    b.append(b_events);
    a.finish(ArtifactTrailer{});
    b.finish(ArtifactTrailer{});
    EXPECT_EQ(read_back(path).events, later_first ? b_events : a_events);
    EXPECT_EQ(read_back(other.file_path()).events, later_first ? a_events : b_events);
    EXPECT_EQ(names_in(dir).size(), 2u);
  }
}

// A file another program removed or replaced while it was written: finish()
// says the records are lost instead of reporting them written.
TEST(ArtifactOutput, FileReplacedWhileWrittenIsReported) {
  TempDir dir;
  const std::string path = dir.file("a.zst");
  ArtifactWriter writer(path, ArtifactHeader{});
  writer.publish();
  writer.append(random_events(10, 1));
  write_bytes(dir.file("other"), Bytes{'x'});
  std::filesystem::rename(dir.file("other"), path);
  try {
    writer.finish(ArtifactTrailer{});
    ADD_FAILURE() << "finish() did not notice the file was replaced";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path + ": removed or replaced by another program"));
  }
  EXPECT_TRUE(writer.stats().replaced);
  EXPECT_EQ(read_bytes(path), Bytes{'x'});
}

TEST(ArtifactOutput, TemporaryFileIsNewAndNotWorldWritable) {
  TempDir dir;
  ArtifactWriter writer(dir.file("a.zst"), ArtifactHeader{});
  struct stat info {};
  ASSERT_EQ(::lstat(writer.file_path().c_str(), &info), 0);
  EXPECT_TRUE(S_ISREG(info.st_mode));
  EXPECT_EQ(info.st_mode & 0022, 0u);
  EXPECT_EQ(info.st_mode & 0111, 0u);
}

// Issue 9, item 3: a frame is closed within about flush_interval of its
// first event, however few events arrive, so a killed writer loses at most
// that much.
TEST(ArtifactFlush, FramesCloseOnTimeAsWellAsSize) {
  TempDir dir;
  const std::string path = dir.file("a.zst");
  ArtifactWriter writer(path, ArtifactHeader{}, {.flush_interval = std::chrono::milliseconds(100)});
  writer.publish();
  std::vector<Event> events = random_events(3, 9);
  writer.append(events[0]);
  writer.append(events[1]);
  // Close to the limit, so the test stays fast yet tolerant of a loaded machine.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (read_back(path).events.size() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ReadBack back = read_back(path);  // the writer still runs: as after kill -9
  EXPECT_EQ(back.events, std::vector<Event>(events.begin(), events.begin() + 2));
  EXPECT_EQ(back.result.stats.frames, 1u);
  writer.append(events[2]);
  writer.finish(ArtifactTrailer{});
  back = read_back(path);
  EXPECT_EQ(back.events, events);
  EXPECT_TRUE(back.result.warnings.empty()) << back.result.warnings.front();
}

TEST(ArtifactFlush, FlushIntervalZeroClosesBySizeOnly) {
  TempDir dir;
  const std::string path = dir.file("a.zst");
  ArtifactWriter writer(path, ArtifactHeader{}, {.flush_interval = {}});
  writer.publish();
  writer.append(random_events(2, 9));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(read_back(path).events.size(), 0u);
  writer.finish(ArtifactTrailer{});
}

// Fault injection: every write of a recording fails in turn.
enum class Fault { ShortThenNoSpace, NoSpace, IoError };

struct FaultyWrites {
  size_t fail_at;        // the index of the first failing write call
  Fault fault;
  bool persistent;       // every later write fails too (a full disk)
  size_t calls = 0;
  ssize_t operator()(int fd, const void* data, size_t size) {
    size_t call = calls++;
    bool failing = call == fail_at || (persistent && call > fail_at) ||
                   (fault == Fault::ShortThenNoSpace && call == fail_at + 1);
    if (!failing) return ::write(fd, data, size);
    if (fault == Fault::ShortThenNoSpace && call == fail_at && size > 1) return ::write(fd, data, size / 2);
    errno = fault == Fault::IoError ? EIO : ENOSPC;
    return -1;
  }
};

constexpr size_t kFaultEvents = 60, kFaultFrameEvents = 10;

// Returns the error message, or "" when the recording succeeded.
std::string record_with(const std::string& path, const std::vector<Event>& events,
                        std::function<ssize_t(int, const void*, size_t)> write) {
  try {
    ArtifactWriter writer(path, ArtifactHeader{},
                          {.workers = 2, .frame_events = kFaultFrameEvents, .flush_interval = {},
                           .write = std::move(write)});
    writer.publish();
    try {
      for (size_t i = 0; i < events.size(); i += 7)  // batches that straddle frames
        writer.append(std::span(events).subspan(i, std::min<size_t>(7, events.size() - i)));
    } catch (const std::runtime_error&) {
      // As the recorder does: stop appending, finish what can be.
    }
    writer.finish(ArtifactTrailer{.counters = {{"kernel_events_lost", 0}}});
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(ArtifactFaults, ShortWritesAloneChangeNothing) {
  TempDir dir;
  std::vector<Event> events = random_events(kFaultEvents, 17);
  ASSERT_EQ(record_with(dir.file("clean"), events, nullptr), "");
  auto trickle = [](int fd, const void* data, size_t size) { return ::write(fd, data, std::min<size_t>(size, 5)); };
  ASSERT_EQ(record_with(dir.file("trickle"), events, trickle), "");
  EXPECT_EQ(read_bytes(dir.file("trickle")), read_bytes(dir.file("clean")));
}

TEST(ArtifactFaults, EveryWriteFailingLeavesTheCompleteFramesReadable) {
  TempDir dir;
  std::vector<Event> events = random_events(kFaultEvents, 17);
  size_t clean_calls = 0;
  ASSERT_EQ(record_with(dir.file("clean"), events,
                        [&](int fd, const void* data, size_t size) {
                          ++clean_calls;
                          return ::write(fd, data, size);
                        }),
            "");
  const size_t frames = kFaultEvents / kFaultFrameEvents;
  ASSERT_EQ(clean_calls, frames + 2);  // header, one per frame (with its marker), trailer
  size_t cases = 0;
  for (Fault fault : {Fault::ShortThenNoSpace, Fault::NoSpace, Fault::IoError}) {
    for (bool persistent : {true, false}) {
      for (size_t fail_at = 0; fail_at < clean_calls; ++fail_at) {
        SCOPED_TRACE("fault " + std::to_string(static_cast<int>(fault)) + (persistent ? " persistent" : " once") +
                     " at write " + std::to_string(fail_at));
        ++cases;
        const std::string path = dir.file("faulty-" + std::to_string(cases));
        std::string error = record_with(path, events, FaultyWrites{fail_at, fault, persistent});
        const char* why = fault == Fault::IoError ? "Input/output error" : "No space left on device";
        EXPECT_THAT(error, HasSubstr(path + ": write failed: " + why));
        if (fail_at == 0) {  // the header: nothing to publish, nothing left behind
          EXPECT_FALSE(std::filesystem::exists(path));
          continue;
        }
        ReadBack back = read_back(path);
        const size_t frames_written = std::min(fail_at - 1, frames);
        EXPECT_EQ(back.events, std::vector<Event>(events.begin(), events.begin() + static_cast<std::ptrdiff_t>(
                                                                                       frames_written * kFaultFrameEvents)));
        EXPECT_FALSE(back.result.error) << *back.result.error;
        EXPECT_FALSE(has_warning(back.result, "truncated")) << ::testing::PrintToString(back.result.warnings);
        // After a one-off error at a frame, the trailer still fits and counts the loss.
        bool trailer_expected = !persistent && fail_at <= frames;
        ASSERT_EQ(back.result.trailer.has_value(), trailer_expected);
        if (trailer_expected) {
          // At least the failed frame; events not appended after the error are the caller's to count.
          uint64_t lost = back.result.trailer->counters.at("write_error_records_dropped");
          EXPECT_GE(lost, kFaultFrameEvents);
          EXPECT_LE(lost, kFaultEvents - frames_written * kFaultFrameEvents);
          // Finalized but incomplete: the one warning says so (exit status 1).
          ASSERT_EQ(back.result.warnings.size(), 1u) << ::testing::PrintToString(back.result.warnings);
          EXPECT_THAT(back.result.warnings[0],
                      HasSubstr(path + ": incomplete: " + std::to_string(lost) + " records were not written"));
        }
      }
    }
  }
  std::printf("%zu recordings with a failing write, each readable up to its last complete frame\n", cases);
}

// A disk holding `capacity` bytes of the one file: writes and claims of
// space past it fail with ENOSPC (a write gets what fits first).
struct DiskOfCapacity {
  uint64_t capacity;
  ssize_t write(int fd, const void* data, size_t size) const {
    const auto at = static_cast<uint64_t>(::lseek(fd, 0, SEEK_CUR));
    if (at >= capacity) {
      errno = ENOSPC;
      return -1;
    }
    return ::write(fd, data, std::min<uint64_t>(size, capacity - at));
  }
  int reserve(uint64_t offset, uint64_t length) const { return offset + length > capacity ? ENOSPC : 0; }
};

TEST(ArtifactFaults, AFullDiskStopsTheFramesWithRoomLeftForTheTrailer) {
  TempDir dir;
  // A frame per record, each 32 KiB of random (incompressible) stack bytes.
  std::mt19937_64 rng(5);
  std::vector<Event> events;
  for (uint64_t i = 0; i < 8; ++i) {
    auto stack = std::make_shared<StackDefinition>();
    stack->hash = i + 1;
    stack->end = StackEnd::NoRule;
    stack->bytes.resize(32 * 1024);
    for (uint8_t& byte : stack->bytes) byte = static_cast<uint8_t>(rng());
    Event event;
    event.type = EventType::Stack;
    event.pid = event.tid = 7;
    event.timestamp = 1000 + i;
    event.stack = std::move(stack);
    events.push_back(std::move(event));
  }
  auto record = [&](const std::string& path, WriterOptions options) -> std::string {
    options.frame_events = 1;
    options.flush_interval = {};
    try {
      ArtifactWriter writer(path, ArtifactHeader{}, std::move(options));
      writer.publish();
      try {
        for (const Event& event : events) writer.append(event);
      } catch (const std::runtime_error&) {
        // As the recorder does: stop appending, finish what can be.
      }
      writer.finish(ArtifactTrailer{.counters = {{"kernel_events_lost", 0}}});
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  // Where the header and each frame end on a disk without limit.
  std::vector<uint64_t> ends;
  ASSERT_EQ(record(dir.file("unlimited"), {.write =
                                               [&](int fd, const void* data, size_t size) {
                                                 ssize_t written = ::write(fd, data, size);
                                                 ends.push_back(static_cast<uint64_t>(::lseek(fd, 0, SEEK_CUR)));
                                                 return written;
                                               }}),
            "");
  ASSERT_EQ(ends.size(), events.size() + 2);  // header, frames, trailer
  // Room for three frames and 10 bytes: the fourth frame would take the
  // space of any trailer.
  const DiskOfCapacity disk{ends[3] + 10};
  const std::string path = dir.file("full");
  std::string error = record(path, {.write = [&](int fd, const void* data, size_t size) { return disk.write(fd, data, size); },
                                    .reserve = [&](int, uint64_t offset, uint64_t length) { return disk.reserve(offset, length); }});
  EXPECT_THAT(error, HasSubstr(path + ": write failed: No space left on device"));
  EXPECT_THAT(error, Not(HasSubstr("no room for the trailer")));
  ReadBack back = read_back(path);
  EXPECT_FALSE(back.result.error) << *back.result.error;
  ASSERT_TRUE(back.result.trailer.has_value());
  // The frames before the one that would have left no room: a trailer's room
  // (kTrailerRoomBytes) is more than one frame here, less than two.
  ASSERT_FALSE(back.events.empty());
  EXPECT_EQ(back.events, std::vector<Event>(events.begin(), events.begin() + static_cast<std::ptrdiff_t>(back.events.size())));
  // At least the frame refused; records not appended after the error are the caller's to count.
  uint64_t lost = back.result.trailer->counters.at("write_error_records_dropped");
  EXPECT_GE(lost, 1u);
  EXPECT_LE(lost, events.size() - back.events.size());
}

}  // namespace
}  // namespace memtrack::test
