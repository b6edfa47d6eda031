#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#include "format/artifact.h"
#include "format/heap_runs.h"
#include "format/records.h"
#include "util/hex.h"
#include "util/monotonic_clock.h"

namespace memtrack {

namespace {

struct CCtxDeleter {
  void operator()(ZSTD_CCtx* cctx) const { ZSTD_freeCCtx(cctx); }
};

// A name no one can have planted: 96 random bits, next to the target so
// that the final rename stays on one file system.
std::string temporary_name_for(const std::string& path) {
  uint8_t random[12];
  if (::getrandom(random, sizeof random, 0) != static_cast<ssize_t>(sizeof random)) {
    throw std::runtime_error(path + ": getrandom failed: " + std::strerror(errno));
  }
  return path + "." + hex(random) + ".tmp";
}

// A writer holds an exclusive flock on its file from creation to the end of
// finish(), published or not: another recording that meets the file at the
// output name knows it is being written and leaves it alone.
//
// Opens the regular file at `path` (never following a symlink, never
// blocking); -1 when there is none.
int open_existing_artifact(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return -1;
  return ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

std::string being_written_message(const std::string& path) {
  return path + ": another recording is writing this file (it holds its lock); give this one another output name";
}

}  // namespace

bool artifact_being_written(const std::string& path) {
  int fd = open_existing_artifact(path);
  if (fd < 0) return false;
  bool locked = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return locked;
}

class ArtifactWriter::Impl {
 public:
  Impl(const std::string& path, const ArtifactHeader& header, WriterOptions options);
  ~Impl();

  void append(std::span<const Event> events);
  void append_module(std::shared_ptr<const ModuleInfo> module);
  // At finish(): the aggregator's state in Aggregate records, a frame each.
  void append_aggregate_state();
  void publish();
  void finish(ArtifactTrailer trailer);
  void flush();
  // write_checkpoint(), one at a time, counted.
  bool checkpoint();
  uint64_t live_heap_bytes() const { return live_heap_bytes_.load(std::memory_order_relaxed); }
  // Stops everything and removes the unpublished file.
  void discard();
  WriterStats stats() const {
    std::lock_guard lock(mutex_);
    WriterStats stats = stats_;
    stats.aggregated_events = aggregated_events_.load(std::memory_order_relaxed);
    return stats;
  }
  std::string error() const {
    std::lock_guard lock(mutex_);
    return failure_;
  }
  bool finished() const { return finished_; }
  bool published() const { return published_; }
  const std::string& file_path() const { return published_ && !kept_own_name_ ? path_ : temporary_path_; }

 private:
  // A frame's records, packed by append() as they come: the Events
  // themselves are not kept (120 bytes each against ~20 packed; copying them
  // into the frame and reading them back on the worker, from a frame too big
  // for the caches, cost more than packing them while they are hot).
  struct FrameJob {
    uint64_t index = 0;  // position among the event frames; fixes the write order
    records::ByteBuffer packed;
    uint64_t records = 0;
    std::shared_ptr<const ModuleInfo> module;  // a frame holding one Module record instead
  };
  // One compression thread and the buffers it reuses frame after frame.
  struct Worker {
    std::unique_ptr<ZSTD_CCtx, CCtxDeleter> cctx;
    records::ByteBuffer packed;  // a Module record's
    // Sized exactly (plus headroom) rather than by doubling: it is the
    // largest per-worker buffer after `packed`.
    std::unique_ptr<char[]> compressed;
    size_t compressed_capacity = 0;
    size_t accounted_bytes = 0;  // share of stats_.buffer_bytes
    std::thread thread;
  };

  void run_worker(Worker& worker);
  // Closes frames that have waited flush_interval, however small, and
  // writes the checkpoints.
  void run_flusher();
  // The aggregator's state so far at checkpoint_path(file_path()), once the
  // frames before it are written; false when it could not be written.
  bool write_checkpoint();
  std::mutex checkpoint_mutex_;  // one checkpoint at a time
  void stop_flusher();
  // Returns 0 or the errno of the failed write.
  int write_fully(const char* data, size_t size);
  // After a failed write: the file ends again after the last complete frame.
  void cut_back_to(uint64_t good_bytes);
  // Claims the disk space of [offset, offset + length) (kTrailerRoomBytes);
  // 0, or the errno that says the disk is full. Where the file system cannot
  // claim space ahead, claims nothing from then on and returns 0.
  int reserve(uint64_t offset, uint64_t length);
  // Gives back the space claimed past the end of the file.
  void release_reserved();
  // Under append_mutex_. Hands the current frame to the workers; blocks
  // while `workers` frames are in flight. Throws the first failure (the
  // frame is then dropped).
  void submit_frame();
  void append_heap_event(const Event& event);
  // Packs the run of allocation records into the frame: the next record is
  // not one of them, or the frame closes.
  void close_heap_run();
  // Under the lock: waits for a slot among the frames in flight (throwing the
  // first worker failure), then queues `job` with the next index.
  void queue_job(std::unique_lock<std::mutex>& lock, FrameJob job);
  void stop_workers();
  std::string io_error(const char* what, int error) const {
    return path_ + ": " + what + ": " + std::strerror(error);
  }

  const std::string path_;
  const std::string temporary_path_;
  const WriterOptions options_;
  const size_t max_frames_in_flight_;
  int fd_ = -1;
  bool reserving_ = true;     // the file system claims space ahead (fallocate)
  uint64_t reserved_end_ = 0;  // the end of the space claimed so far
  bool finished_ = false;
  bool published_ = false;
  // publish() found another recording writing `path_`: this one stays at
  // its own (temporary) name.
  bool kept_own_name_ = false;

  // The frame being filled, shared by the appending thread and the flusher.
  std::mutex append_mutex_;
  ArtifactHeader header_;  // as written
  std::condition_variable flusher_wake_;
  bool flusher_stopping_ = false;
  std::thread flusher_;
  std::chrono::steady_clock::time_point frame_started_;  // its first event's arrival
  uint64_t records_appended_ = 0;  // events and modules, written or not
  std::atomic<uint64_t> live_heap_bytes_{0};  // heap_runs_.live_bytes(), for other threads
  records::ByteBuffer current_frame_;   // its events, packed
  // Compact layout: the run of allocation records not yet packed into
  // current_frame_, and the blocks' numbers.
  records::HeapRunEncoder heap_runs_;
  size_t heap_run_bound_ = 0;  // what current_frame_bound_ counts for the run, at least run_bytes()
  uint32_t heap_events_uncounted_ = 0;  // heap events since run_bytes() was last asked
  uint64_t current_frame_events_ = 0;  // records that count against frame_events
  uint64_t current_frame_records_ = 0;  // every event in the frame
  size_t current_frame_bound_ = 0;      // packed-size upper bound of current_frame_
  size_t current_frame_accounted_ = 0;  // its capacity already in buffer_bytes
  uint64_t frames_submitted_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable job_available_;
  // Signalled when a frame is written, which frees a slot and may be the
  // turn another worker waits for.
  std::condition_variable frame_written_;
  std::deque<FrameJob> queue_;
  std::vector<records::ByteBuffer> spare_frames_;  // written, capacity kept
  uint64_t next_frame_to_write_ = 0;
  size_t frames_in_flight_ = 0;  // submitted, not yet written
  bool stopping_ = false;
  std::string failure_;  // the first error; later writes are skipped
  WriterStats stats_;
  std::atomic<uint64_t> aggregated_events_{0};  // appended under append_mutex_
  std::vector<std::unique_ptr<Worker>> workers_;
};

ArtifactWriter::Impl::Impl(const std::string& path, const ArtifactHeader& header,
                           WriterOptions options)
    : path_(path),
      temporary_path_(temporary_name_for(path)),
      options_(options),
      // A frame per worker: a frame queued behind a busy worker would hold
      // its events (7.8 MB) unpacked while the appender fills the next, and
      // a worker takes the next frame as soon as it has written its own
      // (the appender, faster, has it ready), so a deeper queue bought no
      // speed: recording 2 M events on the fast path took no longer with one
      // frame in flight than with two, and its recorder peaked 7 MiB lower.
      max_frames_in_flight_(size_t{options.workers}) {
  if (options.workers == 0) throw std::invalid_argument("ArtifactWriter: workers must be >= 1");
  if (options.frame_events == 0) {
    throw std::invalid_argument("ArtifactWriter: frame_events must be >= 1");
  }
  ZSTD_bounds levels = ZSTD_cParam_getBounds(ZSTD_c_compressionLevel);
  if (options.zstd_level < levels.lowerBound || options.zstd_level > levels.upperBound) {
    throw std::invalid_argument("ArtifactWriter: zstd_level " + std::to_string(options.zstd_level) +
                                " is out of range");
  }
  for (unsigned i = 0; i < options.workers; ++i) {
    auto worker = std::make_unique<Worker>();
    worker->cctx.reset(ZSTD_createCCtx());
    if (!worker->cctx) throw std::bad_alloc();
    ZSTD_CCtx_setParameter(worker->cctx.get(), ZSTD_c_compressionLevel, options.zstd_level);
    // A content checksum per frame is what lets the reader tell a damaged
    // frame from a valid one.
    ZSTD_CCtx_setParameter(worker->cctx.get(), ZSTD_c_checksumFlag, 1);
    workers_.push_back(std::move(worker));
  }

  // Two recordings to one name: the second would replace the first's file
  // while the first goes on writing into the replaced (deleted) one.
  if (artifact_being_written(path_)) throw std::runtime_error(being_written_message(path_));
  // Exclusive and without following symlinks: a name planted by another
  // user makes this fail instead of writing where they point.
  fd_ = ::open(temporary_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw std::runtime_error(path_ + ": cannot create " + temporary_path_ + ": " + std::strerror(errno));
  }
  // A new file nobody else has opened: this cannot be refused (a file
  // system without flock leaves the file unlocked, as before).
  (void)::flock(fd_, LOCK_EX | LOCK_NB);
  records::ByteBuffer header_frame;
  ArtifactHeader written_header = header;
  // The version follows the layout, unless the caller wrote another on
  // purpose (tests of other versions).
  if (header.format_version == kFormatVersion || header.format_version == kRecordsFormatVersion)
    written_header.format_version =
        options_.layout == ArtifactLayout::Compact ? kFormatVersion : kRecordsFormatVersion;
  if (options_.aggregator && std::find(header.features.begin(), header.features.end(), kAggregatedFeature) ==
                                 header.features.end())
    written_header.features.push_back(kAggregatedFeature);
  records::append_header_frame(written_header, header_frame);
  header_ = written_header;
  if (int error = write_fully(header_frame.data(), header_frame.size())) {
    discard();
    throw std::runtime_error(io_error("write failed", error));
  }
  stats_.bytes = header_frame.size();
  // A disk too full for the trailer's room takes no frame (see run_worker).
  if (int error = reserve(stats_.bytes, kTrailerRoomBytes)) failure_ = io_error("write failed", error);

  try {
    for (auto& worker : workers_) {
      worker->thread = std::thread([this, w = worker.get()] { run_worker(*w); });
    }
    if (options_.flush_interval.count() > 0 || (options_.aggregator && options_.checkpoint_interval.count() > 0))
      flusher_ = std::thread([this] { run_flusher(); });
  } catch (...) {
    discard();
    throw;
  }
}

ArtifactWriter::Impl::~Impl() {
  stop_flusher();
  stop_workers();
  if (fd_ >= 0) ::close(fd_);
}

int ArtifactWriter::Impl::write_fully(const char* data, size_t size) {
  while (size > 0) {
    ssize_t written = options_.write ? options_.write(fd_, data, size) : ::write(fd_, data, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (written == 0) return EIO;  // no progress: never loop forever
    data += written;
    size -= static_cast<size_t>(written);
  }
  return 0;
}

int ArtifactWriter::Impl::reserve(uint64_t offset, uint64_t length) {
  if (!reserving_ || offset + length <= reserved_end_) return 0;
  for (;;) {
    int error = 0;
    if (options_.reserve) {
      error = options_.reserve(fd_, offset, length);
    } else if (::fallocate(fd_, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset), static_cast<off_t>(length)) != 0) {
      error = errno;
    }
    if (error == EINTR) continue;
    if (error == ENOSPC || error == EDQUOT || error == EFBIG) return error;
    if (error != 0) {
      reserving_ = false;  // EOPNOTSUPP and the like: frames meet a full disk as they come
      return 0;
    }
    reserved_end_ = offset + length;
    return 0;
  }
}

void ArtifactWriter::Impl::release_reserved() {
  if (options_.reserve || reserved_end_ <= stats_.bytes) return;
  // Best effort: at worst the claimed blocks stay with the file.
  (void)::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(stats_.bytes),
                    static_cast<off_t>(reserved_end_ - stats_.bytes));
}

void ArtifactWriter::Impl::cut_back_to(uint64_t good_bytes) {
  // Best effort: if even this fails, the reader reports the partial frame
  // as truncated.
  if (::ftruncate(fd_, static_cast<off_t>(good_bytes)) == 0) {
    ::lseek(fd_, static_cast<off_t>(good_bytes), SEEK_SET);
  }
}

void ArtifactWriter::Impl::discard() {
  stop_flusher();
  stop_workers();
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  if (!published_) ::unlink(temporary_path_.c_str());
  finished_ = true;
}

void ArtifactWriter::Impl::publish() {
  if (published_) return;
  // Every writer replaces the file at `path_` only while it holds that
  // file's lock and the file is still there, or creates the name when there
  // is none (RENAME_NOREPLACE): of two writers publishing at once, the
  // second meets the first's file, locked.
  auto rename_failed = [&] {
    return std::runtime_error(path_ + ": cannot rename " + temporary_path_ + " into place: " + std::strerror(errno));
  };
  for (int attempt = 0; attempt < 100; ++attempt) {
    int existing = open_existing_artifact(path_);
    if (existing < 0) {
      struct stat st;
      if (::lstat(path_.c_str(), &st) == 0) {  // a symlink or another non-file: replaced, never followed
        if (::rename(temporary_path_.c_str(), path_.c_str()) != 0) throw rename_failed();
        published_ = true;
        return;
      }
      if (::renameat2(AT_FDCWD, temporary_path_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE) == 0) {
        published_ = true;
        return;
      }
      if (errno == EEXIST) continue;  // created meanwhile: look at it
      if (errno != EINVAL && errno != ENOSYS) throw rename_failed();
      if (::rename(temporary_path_.c_str(), path_.c_str()) != 0) throw rename_failed();  // no RENAME_NOREPLACE here
      published_ = true;
      return;
    }
    if (::flock(existing, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
      ::close(existing);
      // Another recording writes it: this one keeps its own name rather
      // than replace that file under the other's feet.
      published_ = true;
      kept_own_name_ = true;
      return;
    }
    struct stat held, named;
    bool still_there = ::fstat(existing, &held) == 0 && ::lstat(path_.c_str(), &named) == 0 && same_file(held, named);
    if (!still_there) {  // replaced since it was opened: look again
      ::close(existing);
      continue;
    }
    int renamed = ::rename(temporary_path_.c_str(), path_.c_str());
    int error = errno;
    ::close(existing);
    errno = error;
    if (renamed != 0) throw rename_failed();
    published_ = true;
    return;
  }
  published_ = true;  // the name never held still: keep this one's own
  kept_own_name_ = true;
}

void ArtifactWriter::Impl::run_flusher() {
  const auto interval = options_.flush_interval;
  const auto checkpoint_interval = options_.aggregator ? options_.checkpoint_interval : std::chrono::milliseconds(0);
  // A frame closes between 1 and 1.125 intervals after its first event.
  const auto tick = std::max((interval.count() > 0 ? interval : checkpoint_interval) / 8, std::chrono::milliseconds(1));
  auto next_checkpoint = std::chrono::steady_clock::now() + checkpoint_interval;
  std::unique_lock lock(append_mutex_);
  while (!flusher_stopping_) {
    flusher_wake_.wait_for(lock, tick);
    if (flusher_stopping_) continue;
    if (checkpoint_interval.count() > 0 && std::chrono::steady_clock::now() >= next_checkpoint) {
      lock.unlock();
      checkpoint();
      lock.lock();
      // From its end: a slow checkpoint is not followed by another at once.
      next_checkpoint = std::chrono::steady_clock::now() + checkpoint_interval;
      continue;
    }
    if (interval.count() == 0 || current_frame_bound_ == 0) continue;
    if (std::chrono::steady_clock::now() - frame_started_ < interval) continue;
    try {
      submit_frame();
    } catch (...) {
      // The write error is thrown to the appender by its next append or finish.
    }
  }
}

namespace {

// A checkpoint's aggregator: the state taken from the recording's.
class TakenState final : public EventAggregator {
 public:
  explicit TakenState(std::vector<uint8_t> state) : state_(std::move(state)) {}
  void add(const Event&) override {}
  std::vector<uint8_t> state() const override { return state_; }
  uint64_t live_bytes() const override { return 0; }

 private:
  std::vector<uint8_t> state_;
};

}  // namespace

bool ArtifactWriter::Impl::checkpoint() {
  if (!options_.aggregator) return false;
  std::lock_guard one_at_a_time(checkpoint_mutex_);
  const auto started = std::chrono::steady_clock::now();
  const bool written = write_checkpoint();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  std::lock_guard stats_lock(mutex_);
  ++(written ? stats_.checkpoints_written : stats_.checkpoints_failed);
  stats_.checkpoint_longest_ms = std::max<uint64_t>(stats_.checkpoint_longest_ms, took.count());
  return written;
}

bool ArtifactWriter::Impl::write_checkpoint() {
  std::vector<uint8_t> state;
  {
    std::lock_guard append_lock(append_mutex_);
    state = options_.aggregator->state();
  }
  const uint64_t taken_ns = monotonic_ns();
  try {
    flush();  // the Stack records its sites name are in the file first
    // Written whole under a temporary name, then renamed over the last one.
    ArtifactWriter checkpoint(checkpoint_path(file_path()), header_,
                              {.layout = options_.layout,
                               .flush_interval = {},
                               .aggregator = std::make_shared<TakenState>(std::move(state))});
    ArtifactTrailer trailer;
    trailer.end_monotonic_ns = taken_ns;
    checkpoint.finish(trailer);
    return true;
  } catch (const std::exception&) {
    return false;  // counted; the last checkpoint stays
  }
}

void ArtifactWriter::Impl::stop_flusher() {
  {
    std::lock_guard lock(append_mutex_);
    flusher_stopping_ = true;
  }
  flusher_wake_.notify_all();
  if (flusher_.joinable()) flusher_.join();
}

void ArtifactWriter::Impl::append(std::span<const Event> events) {
  if (finished_) throw std::logic_error("ArtifactWriter::append after finish");
  std::lock_guard append_lock(append_mutex_);
  const bool compact = options_.layout == ArtifactLayout::Compact;
  for (const Event& event : events) {
    if (options_.aggregator) {
      if (compact && is_allocation(event.type) && event.stack_hash != 0) {
        // The stack's number in this file, as its Stack record and a reader have it.
        Event numbered = event;
        numbered.stack_hash = heap_runs_.stack_number(event.stack_hash);
        options_.aggregator->add(numbered);
      } else {
        options_.aggregator->add(event);
      }
      if (!kept_when_aggregated(event.type)) {
        aggregated_events_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
    }
    if (compact && is_heap_event(event.type)) {
      append_heap_event(event);
      continue;
    }
    size_t bound = records::packed_size_bound(event);
    if (bound > kMaxFrameBytes) {
      throw std::invalid_argument("ArtifactWriter: an event of up to " + std::to_string(bound) +
                                  " bytes exceeds the frame limit");
    }
    if (current_frame_bound_ + bound > kTargetFrameBytes && current_frame_bound_ != 0) submit_frame();
    if (current_frame_bound_ == 0) frame_started_ = std::chrono::steady_clock::now();
    if (compact) {
      close_heap_run();
      heap_runs_.observe(event);
    }
    if (compact && event.type == EventType::Stack && event.stack) {
      Event numbered = event;
      auto definition = std::make_shared<StackDefinition>(*event.stack);
      definition->hash = heap_runs_.stack_number(definition->hash);
      numbered.stack = std::move(definition);
      records::pack_events(std::span<const Event>(&numbered, 1), current_frame_);
    } else {
      records::pack_events(std::span<const Event>(&event, 1), current_frame_);
    }
    ++current_frame_events_;
    ++current_frame_records_;
    ++records_appended_;
    current_frame_bound_ += bound;
    if (current_frame_events_ >= options_.frame_events) submit_frame();
  }
  if (options_.aggregator)
    live_heap_bytes_.store(options_.aggregator->live_bytes(), std::memory_order_relaxed);
  else if (compact)
    live_heap_bytes_.store(heap_runs_.live_bytes(), std::memory_order_relaxed);
}

void ArtifactWriter::Impl::append_heap_event(const Event& event) {
  // A heap event adds at most ~120 bytes to its run (a realloc naming new
  // sites and threads): far below any limit.
  constexpr size_t kHeapEventMaxBytes = 128;
  if (current_frame_bound_ + kHeapEventMaxBytes > kTargetFrameBytes && current_frame_bound_ != 0) submit_frame();
  if (current_frame_bound_ == 0) frame_started_ = std::chrono::steady_clock::now();
  heap_runs_.add(event);
  ++current_frame_records_;
  ++records_appended_;
  // The run's size is counted exactly every kRunRecount events (its nine
  // columns at every event were a tenth of the writer's work); in between,
  // each event counts the most it can add.
  constexpr uint32_t kRunRecount = 256;
  if (++heap_events_uncounted_ < kRunRecount) {
    current_frame_bound_ += kHeapEventMaxBytes;
    heap_run_bound_ += kHeapEventMaxBytes;
    return;
  }
  heap_events_uncounted_ = 0;
  const size_t run_bytes = heap_runs_.run_bytes();
  current_frame_bound_ = current_frame_bound_ - heap_run_bound_ + run_bytes;
  heap_run_bound_ = run_bytes;
}

void ArtifactWriter::Impl::close_heap_run() {
  if (heap_runs_.run_empty()) return;
  heap_runs_.pack_run(current_frame_);
  heap_run_bound_ = 0;
}

void ArtifactWriter::Impl::submit_frame() {
  close_heap_run();
  heap_runs_.start_frame();
  size_t grown = current_frame_.capacity() - current_frame_accounted_;
  current_frame_accounted_ += grown;
  std::unique_lock lock(mutex_);
  stats_.buffer_bytes += grown;
  current_frame_events_ = 0;
  const uint64_t events = std::exchange(current_frame_records_, 0);
  current_frame_bound_ = 0;
  try {
    queue_job(lock, FrameJob{0, std::move(current_frame_), events, nullptr});
  } catch (...) {
    current_frame_.clear();  // dropped; finish() counts it as lost
    throw;
  }
  // Moved from, it is empty: a written frame's buffer, if any, is filled
  // next (the one in flight comes back once compressed).
  if (!spare_frames_.empty()) {
    current_frame_ = std::move(spare_frames_.back());
    spare_frames_.pop_back();
  }
  current_frame_accounted_ = current_frame_.capacity();
  lock.unlock();
  job_available_.notify_one();
}

void ArtifactWriter::Impl::queue_job(std::unique_lock<std::mutex>& lock, FrameJob job) {
  frame_written_.wait(lock, [&] { return frames_in_flight_ < max_frames_in_flight_; });
  if (!failure_.empty()) throw std::runtime_error(failure_);
  job.index = frames_submitted_++;
  queue_.push_back(std::move(job));
  ++frames_in_flight_;
  stats_.peak_frames_in_flight = std::max(stats_.peak_frames_in_flight, frames_in_flight_);
}

void ArtifactWriter::Impl::append_module(std::shared_ptr<const ModuleInfo> module) {
  if (finished_) throw std::logic_error("ArtifactWriter::append_module after finish");
  std::lock_guard append_lock(append_mutex_);
  size_t bound = records::packed_size_bound(*module);
  if (bound > kMaxFrameBytes) {
    throw std::invalid_argument("ArtifactWriter: a module of up to " + std::to_string(bound) +
                                " bytes exceeds the frame limit");
  }
  if (current_frame_bound_ != 0) submit_frame();  // the events before it, in order
  ++records_appended_;
  std::unique_lock lock(mutex_);
  queue_job(lock, FrameJob{0, {}, 0, std::move(module)});
  lock.unlock();
  job_available_.notify_one();
}

void ArtifactWriter::Impl::append_aggregate_state() {
  const std::vector<uint8_t> state = options_.aggregator->state();
  const size_t parts = std::max<size_t>(1, (state.size() + kAggregatePartBytes - 1) / kAggregatePartBytes);
  for (size_t part = 0; part < parts; ++part) {
    const size_t offset = part * kAggregatePartBytes;
    std::span<const uint8_t> bytes(state.data() + offset, std::min(kAggregatePartBytes, state.size() - offset));
    records::pack_aggregate_part({static_cast<uint32_t>(part), static_cast<uint32_t>(parts), bytes}, current_frame_);
    ++current_frame_records_;
    ++records_appended_;
    current_frame_bound_ += current_frame_.size();
    submit_frame();  // a part per frame
  }
}

void ArtifactWriter::Impl::flush() {
  {
    std::lock_guard append_lock(append_mutex_);
    if (current_frame_bound_ != 0) submit_frame();
  }
  std::unique_lock lock(mutex_);
  const uint64_t submitted = frames_submitted_;
  frame_written_.wait(lock, [&] { return next_frame_to_write_ >= submitted || !failure_.empty(); });
  if (!failure_.empty()) throw std::runtime_error(failure_);
}

void ArtifactWriter::Impl::run_worker(Worker& worker) {
  for (;;) {
    FrameJob job;
    {
      std::unique_lock lock(mutex_);
      job_available_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;  // stopping, and every frame was taken
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    const uint64_t event_count = job.module ? 1 : job.records;
    std::string error;
    size_t compressed_size = 0;
    const records::ByteBuffer& packed = job.module ? worker.packed : job.packed;
    try {
      if (job.module) {
        worker.packed.clear();
        records::pack_module(*job.module, worker.packed);
      }
      // The frame marker goes in front, so marker and frame are one write.
      size_t bound = records::kFrameMarkerBytes + ZSTD_compressBound(packed.size());
      if (worker.compressed_capacity < bound) {
        worker.compressed_capacity = bound + bound / 8;
        worker.compressed = std::make_unique_for_overwrite<char[]>(worker.compressed_capacity);
      }
      compressed_size = ZSTD_compress2(
          worker.cctx.get(), worker.compressed.get() + records::kFrameMarkerBytes,
          worker.compressed_capacity - records::kFrameMarkerBytes, packed.data(), packed.size());
      if (ZSTD_isError(compressed_size)) {
        error = path_ + ": zstd compression failed: " + ZSTD_getErrorName(compressed_size);
      } else {
        uint8_t marker[records::kFrameMarkerBytes];
        records::write_frame_marker({job.index, static_cast<uint32_t>(compressed_size)}, marker);
        std::memcpy(worker.compressed.get(), marker, sizeof marker);
        compressed_size += records::kFrameMarkerBytes;
      }
    } catch (const std::exception& e) {
      error = path_ + ": encoding a frame failed: " + e.what();
    }
    if (!job.module) {
      // Compressed: the appender may fill it again.
      job.packed.clear();
      std::lock_guard lock(mutex_);
      spare_frames_.push_back(std::move(job.packed));
    }
    size_t footprint =
        worker.packed.capacity() + worker.compressed_capacity + ZSTD_sizeof_CCtx(worker.cctx.get());

    bool write_it;
    uint64_t good_bytes;
    {
      std::unique_lock lock(mutex_);
      frame_written_.wait(lock, [&] { return next_frame_to_write_ == job.index; });
      write_it = error.empty() && failure_.empty();
      good_bytes = stats_.bytes;
    }
    // Our turn: every earlier frame is written and every later one waits for
    // this one, so the file needs no lock.
    if (write_it) {
      // The disk space for this frame and for the trailer after it first:
      // a full disk then stops the recording before this frame, with the
      // trailer's room claimed after the frame before.
      if (int full = reserve(good_bytes, compressed_size + kTrailerRoomBytes)) {
        error = io_error("write failed", full);
      } else if (int write_error = write_fully(worker.compressed.get(), compressed_size)) {
        error = io_error("write failed", write_error);
        cut_back_to(good_bytes);
      }
    }
    {
      std::lock_guard lock(mutex_);
      if (!error.empty() && failure_.empty()) failure_ = error;
      if (write_it && error.empty()) {
        stats_.events += event_count;
        stats_.frames += 1;
        stats_.bytes += compressed_size;
      }
      stats_.buffer_bytes += footprint - worker.accounted_bytes;
      worker.accounted_bytes = footprint;
      ++next_frame_to_write_;
      --frames_in_flight_;
    }
    frame_written_.notify_all();
  }
}

void ArtifactWriter::Impl::stop_workers() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  job_available_.notify_all();
  for (auto& worker : workers_) {
    if (worker->thread.joinable()) worker->thread.join();
  }
}

void ArtifactWriter::Impl::finish(ArtifactTrailer trailer) {
  if (finished_) throw std::logic_error("ArtifactWriter::finish called twice");
  finished_ = true;
  stop_flusher();
  {
    std::lock_guard append_lock(append_mutex_);
    try {
      if (current_frame_bound_ != 0) submit_frame();
      if (options_.aggregator && failure_.empty()) append_aggregate_state();
    } catch (...) {
      // The failure is in failure_ and thrown below, after the trailer.
    }
  }
  stop_workers();  // workers drain the queue before they exit

  // Written even after a write error: the frames that made it are then
  // still a finalized recording, with the loss counted.
  if (!failure_.empty()) trailer.counters["write_error_records_dropped"] += records_appended_ - stats_.events;
  if (options_.aggregator && (options_.checkpoint_interval.count() > 0 || stats_.checkpoints_written +
                                                                            stats_.checkpoints_failed > 0)) {
    trailer.counters["checkpoints_written"] = stats_.checkpoints_written;
    trailer.counters["checkpoints_failed"] = stats_.checkpoints_failed;
    trailer.counters["checkpoint_longest_ms"] = stats_.checkpoint_longest_ms;
  }
  trailer.events = stats_.events;
  trailer.frames = stats_.frames;
  records::ByteBuffer trailer_frame;
  records::append_trailer_frame(trailer, trailer_frame);
  if (int error = write_fully(trailer_frame.data(), trailer_frame.size())) {
    cut_back_to(stats_.bytes);
    failure_ = failure_.empty() ? io_error("write failed", error) : failure_ + "; no room for the trailer either";
  } else {
    std::lock_guard lock(mutex_);  // stats() may be called concurrently
    stats_.bytes += trailer_frame.size();
    stats_.trailer_written = true;
  }
  release_reserved();
  publish();
  // The name must still hold this file (another program may have removed
  // or replaced it): never report events written to a file nobody can read.
  struct stat held, named;
  if (::fstat(fd_, &held) == 0 && (::lstat(file_path().c_str(), &named) != 0 || !same_file(held, named))) {
    std::lock_guard lock(mutex_);
    stats_.replaced = true;
    failure_ = file_path() + ": removed or replaced by another program while it was being written: the " +
               std::to_string(stats_.events) + " records written are lost";
  }
  // Closing releases the lock: the file is complete.
  if (::close(std::exchange(fd_, -1)) != 0 && failure_.empty()) failure_ = io_error("close failed", errno);
  // Complete with its own figures: the checkpoint has served.
  if (options_.aggregator && failure_.empty() && stats_.trailer_written)
    ::unlink(checkpoint_path(file_path()).c_str());
  if (!failure_.empty()) throw std::runtime_error(failure_);
}

ArtifactWriter::ArtifactWriter(const std::string& path, const ArtifactHeader& header,
                               WriterOptions options)
    : impl_(std::make_unique<Impl>(path, header, options)) {}

ArtifactWriter::~ArtifactWriter() {
  if (impl_->finished()) return;
  if (!impl_->published()) {
    impl_->discard();  // nothing replaced, nothing left behind
    return;
  }
  try {
    impl_->finish(ArtifactTrailer{});
  } catch (...) {
    // A destructor must not throw; callers who care call finish().
  }
}

void ArtifactWriter::append(std::span<const Event> events) { impl_->append(events); }

void ArtifactWriter::append_module(std::shared_ptr<const ModuleInfo> module) {
  impl_->append_module(std::move(module));
}

void ArtifactWriter::publish() { impl_->publish(); }

void ArtifactWriter::finish(ArtifactTrailer trailer) { impl_->finish(std::move(trailer)); }

void ArtifactWriter::flush() { impl_->flush(); }

bool ArtifactWriter::checkpoint() { return impl_->checkpoint(); }

uint64_t ArtifactWriter::live_heap_bytes() const { return impl_->live_heap_bytes(); }

const std::string& ArtifactWriter::file_path() const { return impl_->file_path(); }

WriterStats ArtifactWriter::stats() const { return impl_->stats(); }

std::string ArtifactWriter::error() const { return impl_->error(); }

}  // namespace memtrack
