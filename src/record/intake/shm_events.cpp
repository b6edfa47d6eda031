#include "record/intake/shm_events.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>

#include "module/elf_file.h"
#include "record/intake/shared_counters.h"
#include "record/intake/wire_events.h"
#include "record/system_error.h"
#include "wire/shared_memory.h"

namespace memtrack {

namespace {


long futex(uint32_t* word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
}

}  // namespace

InterposerChannel::InterposerChannel(std::string library, uid_t owner_uid, bool allow_tsc)
    : library_(std::move(library)) {
  const uint64_t size = mt_shm_size();
  struct statvfs fs;
  // The file is sparse, but a thread's chunk must never fault for want of
  // room (the process would get SIGBUS): the whole of it must fit.
  if (statvfs("/dev/shm", &fs) != 0 || uint64_t(fs.f_bavail) * fs.f_frsize < size)
    throw std::runtime_error("/dev/shm has less than " + std::to_string(size >> 20) + " MiB free");
  std::random_device random;
  char name[96];
  std::snprintf(name, sizeof(name), "/dev/shm/memtrack-%d-%08x", getpid(), random());
  path_ = name;
  int fd = open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw system_error("cannot create " + path_);
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 ||
      (owner_uid != static_cast<uid_t>(-1) && fchown(fd, owner_uid, static_cast<gid_t>(-1)) != 0)) {
    auto error = system_error("cannot set up " + path_);
    close(fd);
    unlink(path_.c_str());
    throw error;
  }
  base_ = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    unlink(path_.c_str());
    throw system_error("cannot map " + path_);
  }
  header_ = static_cast<mt_shm_header*>(base_);
  header_->version = MT_SHM_VERSION;
  header_->recorder_pid = static_cast<uint32_t>(getpid());
  header_->chunk_count = MT_SHM_CHUNKS;
  header_->chunk_events = MT_SHM_CHUNK_EVENTS;
  header_->chunk_size = sizeof(mt_shm_chunk);
  std::string why_not_tsc;  // the trailer's interposer_clock_tsc says which
  if (allow_tsc && TscClock::usable(&why_not_tsc)) {
    clock_.emplace();
    header_->clock = MT_CLOCK_TSC;
  }
  __atomic_store_n(&header_->magic, MT_SHM_MAGIC, __ATOMIC_RELEASE);
  wakeup_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wakeup_fd_ < 0) {
    munmap(base_, size);
    unlink(path_.c_str());
    throw system_error("eventfd");
  }
  doorbell_thread_ = std::thread([this] { watch_doorbell(); });
}

InterposerChannel::~InterposerChannel() {
  end();
  stopping_ = true;
  __atomic_fetch_add(&header_->doorbell, 1, __ATOMIC_RELEASE);
  futex(&header_->doorbell, FUTEX_WAKE, INT_MAX, nullptr);
  doorbell_thread_.join();
  close(wakeup_fd_);
  munmap(base_, mt_shm_size());
  remove_file();
}

uint32_t InterposerChannel::chunks_used() const {
  return std::min(__atomic_load_n(&header_->chunks_used, __ATOMIC_ACQUIRE), MT_SHM_CHUNKS);
}

void InterposerChannel::remove_file() {
  if (!file_removed_) unlink(path_.c_str());
  file_removed_ = true;
}

std::vector<std::string> InterposerChannel::environment_for_command(const std::vector<std::string>& environment) const {
  std::vector<std::string> out;
  std::string preload = library_;
  for (const std::string& entry : environment) {
    if (entry.starts_with("LD_PRELOAD=")) {
      // Ours first, so it sees every call and the next definition it
      // forwards to is the user's.
      std::string user = entry.substr(std::strlen("LD_PRELOAD="));
      if (!user.empty()) preload += " " + user;
    } else if (!entry.starts_with(MT_SHM_ENV "=")) {
      out.push_back(entry);
    }
  }
  out.push_back("LD_PRELOAD=" + preload);
  out.push_back(MT_SHM_ENV "=" + path_);
  return out;
}

void InterposerChannel::set_decision(pid_t pid, bool interposer) {
  if (pid <= 0 || static_cast<uint64_t>(pid) >= MT_SHM_MAX_PIDS) return;
  auto* decision = static_cast<uint8_t*>(base_) + MT_SHM_DECISIONS_OFFSET + pid;
  __atomic_store_n(decision, interposer ? MT_PATH_INTERPOSER : MT_PATH_UPROBES, __ATOMIC_RELEASE);
}

uint64_t InterposerChannel::drain(EventOrder& order, uint64_t watermark, size_t budget) {
  // Each chunk header is a page of its own: scanning all 512 at every drain
  // was 10 % of the recorder's CPU on a program with one thread.
  const uint32_t used = std::min(__atomic_load_n(&header_->chunks_used, __ATOMIC_ACQUIRE), MT_SHM_CHUNKS);
  // The budget is shared by the chunks with events, so that no thread's
  // events wait behind another's.
  size_t with_events = 0;
  for (uint32_t i = 0; i < used; ++i) {
    const mt_shm_chunk* c = mt_shm_chunk_at(base_, i);
    if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) != MT_CHUNK_FREE &&
        __atomic_load_n(&c->head, __ATOMIC_ACQUIRE) != c->tail)
      ++with_events;
  }
  const size_t share = budget == SIZE_MAX || with_events == 0 ? budget : (budget + with_events - 1) / with_events;
  uint64_t drained_to = watermark;
  for (uint32_t i = 0; i < used; ++i) {
    mt_shm_chunk* c = mt_shm_chunk_at(base_, i);
    uint32_t state = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
    if (state == MT_CHUNK_FREE) continue;
    // Read after the state: a retired chunk's head is final.
    uint32_t head = __atomic_load_n(&c->head, __ATOMIC_ACQUIRE);
    uint32_t tail = c->tail;
    if (head - tail > MT_SHM_CHUNK_EVENTS) {  // a producer wrote nonsense
      ++malformed_;
      tail = head - MT_SHM_CHUNK_EVENTS;
    }
    // A thread's events are in time order: one run, merged with the others.
    const uint32_t end = tail + static_cast<uint32_t>(std::min<size_t>(head - tail, share));
    if (tail != end) {
      std::vector<Event> run = order.spare_run();
      run.reserve(end - tail);
      uint64_t previous = 0;
      for (; tail != end; ++tail) {
        // Copied once: the producer (or anything in its process) may write
        // the slot while it is read.
        mt_alloc_event record;
        std::memcpy(&record, &c->events[tail & (MT_SHM_CHUNK_EVENTS - 1)], sizeof(record));
        if (clock_) {
          // A thread's events happened in the chunk's order: a free's tick,
          // read without a fence, may come out a little before the
          // allocation's before it.
          record.timestamp = std::max(clock_->to_ns(record.timestamp), previous);
          previous = record.timestamp;
        }
        if (record.timestamp > watermark) break;
        if (event_from_wire(record, &run.emplace_back())) {
          ++events_;
        } else {
          run.pop_back();
          ++malformed_;
        }
      }
      order.add_run(std::move(run));
    }
    // Left by the budget: nothing stamped from then on may be handed out
    // before it.
    bool left_by_budget = false;
    if (tail != head) {
      const uint64_t next = event_time(c->events[tail & (MT_SHM_CHUNK_EVENTS - 1)].timestamp);
      left_by_budget = next <= watermark;
      if (left_by_budget) drained_to = std::min(drained_to, next ? next - 1 : 0);
    }
    __atomic_store_n(&c->tail, tail, __ATOMIC_SEQ_CST);
    // A thread waiting for room is woken once its chunk is half empty (or
    // drained as far as it can be now): woken at each budget's worth, it
    // filled that and waited again, a futex round trip every ~2,000 events.
    if (__atomic_load_n(&c->waiting, __ATOMIC_SEQ_CST) && (!left_by_budget || head - tail <= MT_SHM_CHUNK_EVENTS / 2))
      futex(&c->tail, FUTEX_WAKE, INT_MAX, nullptr);
    bool owner_gone = false;
    if (state == MT_CHUNK_OWNED) {
      // The claim's time is written last (release), after the pid: 0 while
      // a thread is still claiming the chunk, whose pid may already be that
      // of a process gone before (an exec's new image claims under the same
      // pid), and the chunk is its new owner's.
      const uint64_t claimed = __atomic_load_n(&c->claimed_ns, __ATOMIC_ACQUIRE);
      auto gone = gone_.find(static_cast<pid_t>(__atomic_load_n(&c->pid, __ATOMIC_RELAXED)));
      owner_gone = claimed != 0 && gone != gone_.end() && claimed < gone->second &&
                   __atomic_load_n(&c->head, __ATOMIC_ACQUIRE) == tail;
    }
    if ((state == MT_CHUNK_RETIRED && tail == head) || owner_gone) {
      c->head = c->tail = 0;
      c->pid = c->tid = 0;
      c->waiting = 0;
      c->claimed_ns = 0;
      __atomic_store_n(&c->state, MT_CHUNK_FREE, __ATOMIC_RELEASE);
      ++chunks_freed_;
    }
  }
  // Every chunk of a gone process existed before it went, and its events are
  // stamped before: a call that drained every chunk past its exit freed them.
  std::erase_if(gone_, [drained_to](const auto& entry) { return entry.second <= drained_to; });
  return drained_to;
}

void InterposerChannel::process_gone(pid_t pid, uint64_t timestamp) { gone_[pid] = timestamp; }

void InterposerChannel::acknowledge_wakeup() {
  uint64_t value;
  while (read(wakeup_fd_, &value, sizeof(value)) == sizeof(value)) {
  }
}

void InterposerChannel::end() {
  if (!header_) return;
  __atomic_store_n(&header_->ended, 1, __ATOMIC_SEQ_CST);
  // Only claimed chunks can have a waiter (a later claim sees `ended`; a
  // waiter also looks again every 100 ms): touching the others would fault
  // their pages in.
  const uint32_t used = std::min(__atomic_load_n(&header_->chunks_used, __ATOMIC_SEQ_CST), MT_SHM_CHUNKS);
  for (uint32_t i = 0; i < used; ++i) {
    mt_shm_chunk* c = mt_shm_chunk_at(base_, i);
    if (__atomic_load_n(&c->waiting, __ATOMIC_SEQ_CST)) futex(&c->tail, FUTEX_WAKE, INT_MAX, nullptr);
  }
}

// Producers bump the doorbell (a futex word) when a chunk is half full; the
// poller waits on descriptors, so this thread turns the one into the other.
void InterposerChannel::watch_doorbell() {
  uint32_t seen = __atomic_load_n(&header_->doorbell, __ATOMIC_ACQUIRE);
  while (!stopping_) {
    timespec timeout{0, 50 * 1000 * 1000};
    futex(&header_->doorbell, FUTEX_WAIT, seen, &timeout);
    uint32_t now = __atomic_load_n(&header_->doorbell, __ATOMIC_ACQUIRE);
    if (now != seen) {
      seen = now;
      uint64_t one = 1;
      (void)!write(wakeup_fd_, &one, sizeof(one));
    }
  }
}

uint32_t InterposerChannel::detached() const { return __atomic_load_n(&header_->detached, __ATOMIC_ACQUIRE); }

std::map<std::string, uint64_t> InterposerChannel::counters() const {
  std::map<std::string, uint64_t> counters = {
      {"interposer_events", events_},
      {"interposer_chunks_freed", chunks_freed_},
      {"interposer_malformed_dropped", malformed_},
      {"interposer_clock_tsc", clock_ ? 1u : 0u},
  };
  if (clock_) {
    counters["interposer_clock_readings"] = clock_->readings();
    counters["interposer_clock_max_error_ns"] = clock_->max_error_ns();
  }
  // The interposers' own, in memory the recorded processes can write.
  auto load = [](const uint64_t& v) { return __atomic_load_n(&v, __ATOMIC_RELAXED); };
  add_shared_counters(counters,
                      {{"interposer_full_waits", load(header_->full_waits)},
                       {"interposer_chunk_waits", load(header_->chunk_waits)},
                       {"interposer_arena_allocations", load(header_->arena_allocations)},
                       {"interposer_arena_bytes", load(header_->arena_bytes)},
                       {"interposer_not_first", load(header_->not_interposed)},
                       {"interposer_calls_at_ready_lost", load(header_->calls_at_ready_lost)},
                       {"interposer_address_limited", load(header_->address_limited)},
                       {"interposer_handler_allocations_dropped", load(header_->handler_allocations_dropped)},
                       {"interposer_handler_frees_dropped", load(header_->handler_frees_dropped)}},
                      "interposer_counters_implausible");
  return counters;
}

std::string find_interposer_library() {
  std::error_code error;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return {};
  for (const auto& dir : {self.parent_path(), self.parent_path().parent_path() / "lib" / "memtrack"}) {
    std::filesystem::path library = dir / kInterposerLibraryName;
    if (std::filesystem::is_regular_file(library, error)) return library.lexically_normal().string();
  }
  return {};
}

uint64_t interposer_ready_offset(const std::string& path) {
  if (std::optional<uint64_t> offset = ElfFile(path).dynamic_symbol_offset("memtrack_interposer_ready")) return *offset;
  throw std::runtime_error(path + ": no memtrack_interposer_ready symbol");
}

}  // namespace memtrack
