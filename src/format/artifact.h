// The memtrack artifact: a header in a zstd skippable frame, then independent
// zstd frames of MessagePack event maps, then a trailer in a skippable frame.
// The layout is specified in docs/FORMAT.md.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "format/event.h"
#include "format/module_info.h"

namespace memtrack {

// 2: header and trailer carry a CRC32, each event frame is preceded by a
// frame marker with its sequence number (docs/FORMAT.md, §5).
// 3: allocation records in Heap records of columns (docs/FORMAT.md §2.7).
inline constexpr uint32_t kFormatVersion = 3;
// The version of the Records layout (the seed's, one map per event).
inline constexpr uint32_t kRecordsFormatVersion = 2;

// Allocation records read from the Compact layout name their blocks by
// number: the address the reader gives block n is kBlockKeyBit | n (the top
// bit: never a user-space address).
inline constexpr uint64_t kBlockKeyBit = uint64_t{1} << 63;

// How allocation records are written.
enum class ArtifactLayout {
  // Runs of allocation records as Heap records of columns, blocks named by
  // number and times in 10 µs ticks (format/heap_runs.h): format_version 3.
  Compact,
  // One MessagePack map per event, addresses and nanoseconds as recorded
  // (the seed's layout): format_version 2.
  Records,
};
// Events per zstd frame: frames decode independently, so a damaged frame
// costs at most this many events.
inline constexpr size_t kFrameEvents = 65536;
// The most decompressed bytes one event frame may hold. Writers close a frame
// early rather than exceed it; readers reject larger frames as corrupt, which
// bounds their memory on hostile input.
inline constexpr size_t kMaxFrameBytes = size_t{64} << 20;
// The writer closes a frame once its content may exceed this: frames of
// big Stack records stay small, so the frames in flight (2 per worker) hold
// tens of MB rather than hundreds.
inline constexpr size_t kTargetFrameBytes = size_t{2} << 20;

struct ArtifactHeader {
  uint32_t format_version = kFormatVersion;
  std::vector<std::string> features;  // e.g. "alloc-events", "process-tree"
  std::string recorder_version;
  std::vector<std::string> command;   // the recorded command line, or "--pid N"
  std::string host;
  std::string kernel;
  std::string clock = "CLOCK_MONOTONIC";
  uint64_t start_monotonic_ns = 0;
  uint64_t start_realtime_ns = 0;  // Unix epoch ns at start_monotonic_ns
  uint32_t page_size = 0;
  // For each concern the recorder served with other than its best mechanism
  // because of the kernel: "concern: what was used (why)".
  std::vector<std::string> kernel_fallbacks;
  bool operator==(const ArtifactHeader&) const = default;
};

struct ArtifactTrailer {
  // Loss and statistics counters by name. Names ending in "_lost" or
  // "_dropped" count events that did not reach the artifact.
  std::map<std::string, uint64_t> counters;
  uint64_t events = 0;  // records written: events and modules
  uint64_t frames = 0;  // zstd event frames written
  uint64_t end_monotonic_ns = 0;
  int32_t exit_status = 0;  // the recorded command's wait status
  bool operator==(const ArtifactTrailer&) const = default;
};

// What `record --aggregate` writes instead of each allocation (the feature
// kAggregatedFeature): the figures of every record, kept as they come by an
// aggregator (analyze/heap_aggregate.h) and written once, at finish(), in
// Aggregate records (docs/FORMAT.md §2.9). The file grows with call paths,
// processes and time buckets, not with events.
class EventAggregator {
 public:
  virtual ~EventAggregator() = default;
  // Every record appended, in order.
  virtual void add(const Event& event) = 0;
  // The figures of every record added so far, as the Aggregate records'
  // state: what a recording ending now would hold. Adding may go on after.
  virtual std::vector<uint8_t> state() const = 0;
  // The heap bytes live now in every running process.
  virtual uint64_t live_bytes() const = 0;
};
inline constexpr const char* kAggregatedFeature = "aggregated";
// The records an aggregated artifact still holds: every record but the
// allocation and memory-over-time records, whose figures the Aggregate
// records hold.
inline bool kept_when_aggregated(EventType type) {
  return !is_allocation(type) && type != EventType::Free && !is_memory_record(type);
}
// An Aggregate record's part of the state: a state bigger than this is
// written in several records, each in a frame of its own.
inline constexpr size_t kAggregatePartBytes = size_t{16} << 20;

struct WriterOptions {
  // The recorder writes Compact (record --records-layout: Records); writers
  // of event streams that must read back exactly (tests, tools) keep Records.
  ArtifactLayout layout = ArtifactLayout::Records;
  unsigned workers = 1;  // compression threads
  // Measured on the realistic mix (bench/format_bench, docs/BENCHMARKS.md):
  // level 1 gives the smallest files of levels -5..4 (10.0 bytes/event; 2-4
  // are bigger and slower, negative levels faster but bigger) at 8.5 M
  // events/s on one worker.
  int zstd_level = 1;
  // Records per frame; with the Compact layout, the allocation records of
  // Heap records do not count (frames close by size or age instead, so each
  // frame's tables are written once per ~2 MB).
  size_t frame_events = kFrameEvents;
  // A frame is closed when its first event is this old, however few events
  // it holds, so a killed recorder loses at most about this much. 0: frames
  // close by size only (tests that need reproducible frame boundaries).
  std::chrono::milliseconds flush_interval{1000};
  // The write(2) the writer calls; a seam for fault-injection tests.
  std::function<ssize_t(int fd, const void* data, size_t size)> write = nullptr;
  // Claims disk space for [offset, offset + length) without growing the
  // file (fallocate FALLOC_FL_KEEP_SIZE): 0, or the errno. The same seam.
  std::function<int(int fd, uint64_t offset, uint64_t length)> reserve = nullptr;
  // Set: an aggregated artifact (EventAggregator).
  std::shared_ptr<EventAggregator> aggregator = nullptr;
  // With an aggregator: this often (0: never) the state so far replaces the
  // file at checkpoint_path(file), after every frame before it is written,
  // and finish() removes it once the artifact is complete: a recorder killed
  // before its end leaves the figures up to its last checkpoint.
  std::chrono::milliseconds checkpoint_interval{0};
};

// Where the writer of the artifact at `artifact` keeps its checkpoint: a
// small artifact of the same header, its Aggregate records and a trailer
// (docs/FORMAT.md §2.9).
inline std::string checkpoint_path(const std::string& artifact) { return artifact + ".checkpoint"; }

// Room the writer keeps claimed past the end of the file, so that a full disk
// stops the recording with its trailer still written: a frame is written only
// once the disk space for it and this room is the file's. Trailers take a few
// KiB.
inline constexpr uint64_t kTrailerRoomBytes = 64 * 1024;

// What a writer has done so far; safe to call while it runs.
struct WriterStats {
  uint64_t events = 0;  // records (events and modules) in frames written to the file
  // With an aggregator: the records it took in place of writing them.
  uint64_t aggregated_events = 0;
  uint64_t frames = 0;  // event frames written
  uint64_t bytes = 0;   // file bytes written, header and trailer included
  // Memory held by the writer's frame buffers, packing and compression
  // buffers and zstd contexts. They are reused and never shrink, so this is
  // also the high-water mark; it depends on workers and frame size, not on
  // how many events were written.
  size_t buffer_bytes = 0;
  size_t peak_frames_in_flight = 0;  // never more than workers
  bool trailer_written = false;      // finish() wrote the trailer (also after a write error)
  uint64_t checkpoints_written = 0;  // WriterOptions::checkpoint_interval
  uint64_t checkpoints_failed = 0;
  uint64_t checkpoint_longest_ms = 0;  // taking the state, writing the frames before it and the file
  // At finish(), the file's name no longer held it (another program removed
  // or replaced it): what was written is lost, finish() throws.
  bool replaced = false;
};

// Whether a writer (of this or another process) is writing the file at
// `path`: it holds the file's lock.
bool artifact_being_written(const std::string& path);

// Writes an artifact. append() is called from one thread at a time; frames are
// compressed on `workers` threads and written in order. Memory is bounded: at
// most one frame per worker is in flight, append() blocks beyond that.
//
// The file is first a new one with a random name next to `path`, created
// exclusively (never through a symlink, never over an existing file);
// publish() renames it to `path`. Until then `path` is untouched. The writer
// holds an exclusive flock on its file until finish() closes it, and never
// replaces a file another writer holds: the constructor throws when the file
// at `path` is being written, and a publish() that meets one (both started
// before either published) keeps the file at its own name (file_path()).
//
// After a write error (disk full, I/O error) the file is cut back to the end
// of the last complete frame; append() and finish() throw the error (naming
// the file), later frames are dropped without blocking, and finish() still
// writes the trailer if it fits.
class ArtifactWriter {
 public:
  // Throws std::runtime_error naming the path if the file cannot be created,
  // std::invalid_argument for 0 workers, 0 frame_events or an invalid level.
  ArtifactWriter(const std::string& path, const ArtifactHeader& header, WriterOptions options = {});
  // Unpublished: removes the file. Published: finishes with an empty trailer
  // if finish() was not called.
  ~ArtifactWriter();
  ArtifactWriter(const ArtifactWriter&) = delete;
  ArtifactWriter& operator=(const ArtifactWriter&) = delete;

  // Throws std::invalid_argument for an event that alone would exceed
  // kMaxFrameBytes, std::runtime_error after an I/O error.
  void append(std::span<const Event> events);
  void append(const Event& event) { append(std::span<const Event>(&event, 1)); }
  // Writes a Module record, in its own frame, after every event appended so
  // far. Throws as append() does (std::invalid_argument above kMaxFrameBytes).
  void append_module(std::shared_ptr<const ModuleInfo> module);
  // Renames the file to `path` (replacing a file or symlink there, never
  // following it), unless another writer is writing the file there: then
  // the file keeps its own name (file_path() != path). Throws
  // std::runtime_error naming the path on failure.
  void publish();
  // Flushes the last frame, writes the trailer (events/frames filled in, and
  // after a write error the records left out added to the counter
  // `write_error_records_dropped`; see stats().trailer_written), closes the
  // file and publishes it. After a failed frame write the file ends at the
  // last whole frame and the trailer is written there when it fits. Throws
  // std::runtime_error on I/O errors, after writing what it could.
  void finish(ArtifactTrailer trailer);
  // Writes every event appended so far into the file (the frame being
  // filled is closed, however small): a reader of the file then finds them
  // all. Throws std::runtime_error after a write error.
  void flush();
  // The bytes the compact layout's blocks live after the events appended so
  // far hold (HeapRunEncoder::live_bytes), or the aggregator's; 0 with the
  // records layout. Any thread.
  uint64_t live_heap_bytes() const;
  // With an aggregator: writes the checkpoint now (WriterOptions::
  // checkpoint_interval, which need not be set); false when it could not be
  // written or there is no aggregator. Any thread.
  bool checkpoint();
  // The file being written: a temporary name until published, and after it
  // when another writer held `path`.
  const std::string& file_path() const;

  WriterStats stats() const;
  // The first write error, or empty; any thread. Known as soon as a frame
  // fails, before the next append() or finish() throws it.
  std::string error() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

struct ReadStats {
  uint64_t events = 0;
  uint64_t modules = 0;  // Module records read
  uint64_t aggregate_parts = 0;  // Aggregate records read
  uint64_t frames = 0;
  uint64_t skipped_records = 0;  // records of unknown type or not a map
  uint64_t skipped_frames = 0;   // unknown skippable frames
  // Damage: frames (or unreadable stretches) skipped, and their bytes.
  uint64_t damaged_frames = 0;
  uint64_t damaged_bytes = 0;
  // Sequence numbers (format_version 2): event frames found twice (read
  // once), and event frames the sequence says exist but were not found.
  uint64_t duplicate_frames = 0;
  uint64_t missing_frames = 0;
};

struct ReadResult {
  ArtifactHeader header;
  std::optional<ArtifactTrailer> trailer;  // absent when the recording was not finalized
  ReadStats stats;
  // Problems found: truncated tail, missing trailer, checksum mismatches,
  // damaged frames after the first, duplicate or missing frames.
  std::vector<std::string> warnings;
  // The first damaged frame. The read went on past it: every intact frame's
  // events were delivered.
  std::optional<std::string> error;
};

// Only the header: what a reader needs before streaming (the time origin).
// Throws std::runtime_error naming the file, as read_artifact does.
ArtifactHeader read_artifact_header(const std::string& path);

// Streams an artifact frame by frame (memory bounded by one frame), calling
// on_event for every event in file order. Throws std::runtime_error (naming
// the file) only when the file cannot be opened or has no valid header;
// everything else is reported in the result.
ReadResult read_artifact(const std::string& path, const std::function<void(const Event&)>& on_event);
// The same, also calling on_module for every Module record. Without it,
// Module records are read (counted in ReadStats::modules) and dropped.
ReadResult read_artifact(const std::string& path, const std::function<void(const Event&)>& on_event,
                         const std::function<void(const ModuleInfo&)>& on_module);
// One Aggregate record: part `part` (from 0) of `parts` of the state.
struct AggregatePart {
  uint32_t part = 0;
  uint32_t parts = 0;
  std::span<const uint8_t> state;  // valid during the call only
};
// The same, also calling on_aggregate for every Aggregate record (counted in
// ReadStats::aggregate_parts); without it they are read and dropped.
ReadResult read_artifact(const std::string& path, const std::function<void(const Event&)>& on_event,
                         const std::function<void(const ModuleInfo&)>& on_module,
                         const std::function<void(const AggregatePart&)>& on_aggregate);

}  // namespace memtrack
