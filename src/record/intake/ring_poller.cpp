#include "record/intake/ring_poller.h"

#include <bpf/libbpf.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>
#include <stdexcept>

#include "util/monotonic_clock.h"
#include "record/intake/shm_events.h"
#include "record/intake/shm_stacks.h"
#include "record/intake/wire_events.h"
#include "unwind/stack_unwinder.h"
#include "wire/events.h"
#include "wire/python.h"

namespace memtrack {

namespace {

// The poll period bounds how long events wait in the ring when the kernel
// does not wake us (it wakes us only above wakeup_bytes).
constexpr int kPollMs = 10;
constexpr uint64_t kCommitMarginNs = 2'000'000;

bool memory_type(uint32_t kind, EventType* type) {
  switch (kind) {
    case MT_RSS: *type = EventType::Rss; return true;
    case MT_MMAP: *type = EventType::Mmap; return true;
    case MT_MUNMAP: *type = EventType::Munmap; return true;
    case MT_MREMAP: *type = EventType::Mremap; return true;
    case MT_BRK: *type = EventType::Brk; return true;
    case MT_OWN_MEMORY: *type = EventType::OwnMemory; return true;
    default: return false;
  }
}

static_assert(sizeof(mt_memory_event) == sizeof(mt_alloc_event) &&
                  offsetof(mt_memory_event, kind) == offsetof(mt_alloc_event, kind),
              "the event ring's two record layouts share their size and kind");

std::string bounded_string(const char* text, size_t capacity) {
  return std::string(text, strnlen(text, capacity));
}

std::shared_ptr<ProcessImage> image_of(const mt_process_event& r) {
  auto image = std::make_shared<ProcessImage>();
  image->path = bounded_string(r.path, sizeof(r.path));
  image->comm = bounded_string(r.comm, sizeof(r.comm));
  size_t len = std::min<size_t>(r.args_len, sizeof(r.args));
  for (size_t pos = 0; pos < len;) {
    size_t n = strnlen(r.args + pos, len - pos);
    image->argv.emplace_back(r.args + pos, n);
    pos += n + 1;
  }
  return image;
}

// Puts back the return addresses an exception is about to unwind through
// (alloc.bpf.c, on_unwind) while the thread waits stopped, then resumes it
// if the kernel stopped it. A slot is written only while it still holds the
// trampoline. Returns whether every slot holds its original address.
bool restore_return_addresses(pid_t pid, const mt_return_restore& restore, bool stopped, const BpfSession& session) {
  bool all = true;
  for (uint32_t i = 0; i < std::min<uint32_t>(restore.count, MT_MAX_RESTORES); ++i) {
    const mt_return_slot& slot = restore.slots[i];
    uint64_t current = 0;
    iovec local{&current, sizeof(current)};
    iovec remote{reinterpret_cast<void*>(slot.address), sizeof(current)};
    if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != sizeof(current)) {
      all = false;
      continue;
    }
    // A tail call from one probed function to another (operator new[] ->
    // operator new) chains two return instances on one slot.
    if (current == slot.original) continue;
    if (current != slot.expected) {
      all = false;
      continue;
    }
    uint64_t original = slot.original;
    local = {&original, sizeof(original)};
    if (process_vm_writev(pid, &local, 1, &remote, 1, 0) != sizeof(original)) all = false;
  }
  if (stopped) session.resume_task(pid);
  return all;
}

}  // namespace

RingPoller::RingPoller(BpfSession& session, ProbeAttacher& attacher, MappingCollector& mappings,
                       UnwindLearner* learner, Wiring wiring)
    : session_(session),
      attacher_(attacher),
      mappings_(mappings),
      learner_(learner),
      sink_(std::move(wiring.sink)),
      spare_batch_(std::move(wiring.spare_batch)),
      interposer_(wiring.interposer),
      interposer_room_(std::move(wiring.interposer_room)),
      interposer_stacks_(wiring.interposer_stacks) {
  // The process ring is drained before the event ring, so a process's Fork
  // is always in hand before the first event of that process.
  rings_ = ring_buffer__new(session_.process_ring_fd(), &RingPoller::on_process_record, this, nullptr);
  // Stack definitions come before the events referring to them.
  if (!rings_ || (learner_ && ring_buffer__add(rings_, session_.stack_ring_fd(), &RingPoller::on_stack_record, this)) ||
      ring_buffer__add(rings_, session_.event_ring_fd(), &RingPoller::on_alloc_record, this))
    throw std::runtime_error("cannot open the BPF ring buffers");
  try {
    wait_for_stop_and_interposer_too();
  } catch (...) {  // no destructor runs for a constructor that throws
    if (wait_fd_ >= 0) close(wait_fd_);
    if (stop_fd_ >= 0) close(stop_fd_);
    ring_buffer__free(rings_);
    throw;
  }
}

RingPoller::~RingPoller() {
  stop();
  ring_buffer__free(rings_);
  if (wait_fd_ >= 0) close(wait_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
}

// One epoll for the rings, stop() and the interposer's wake-up: the last
// drain starts as soon as the recording ends, not at the end of a wait.
void RingPoller::wait_for_stop_and_interposer_too() {
  wait_fd_ = epoll_create1(EPOLL_CLOEXEC);
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event rings{EPOLLIN, {}}, stop{EPOLLIN, {}}, wakeup{EPOLLIN, {}};
  if (wait_fd_ < 0 || stop_fd_ < 0 || epoll_ctl(wait_fd_, EPOLL_CTL_ADD, ring_buffer__epoll_fd(rings_), &rings) != 0 ||
      epoll_ctl(wait_fd_, EPOLL_CTL_ADD, stop_fd_, &stop) != 0)
    throw std::runtime_error("cannot wait for the rings");
  if (interposer_ && epoll_ctl(wait_fd_, EPOLL_CTL_ADD, interposer_->wakeup_fd(), &wakeup) != 0)
    throw std::runtime_error("cannot wait for the interposer's events");
}

void RingPoller::wait_for_data(int timeout_ms) {
  epoll_event ready[3];
  epoll_wait(wait_fd_, ready, 3, timeout_ms);
  if (interposer_) interposer_->acknowledge_wakeup();
}

void RingPoller::start() { thread_ = std::thread([this] { run(); }); }

void RingPoller::post(std::vector<Event>&& events) {
  std::lock_guard lock(posted_mutex_);
  posted_.insert(posted_.end(), std::make_move_iterator(events.begin()), std::make_move_iterator(events.end()));
}

void RingPoller::stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof(one));  // stays readable: no wait after this
  thread_.join();
}

int RingPoller::on_alloc_record(void* self_ptr, void* data, size_t size) {
  auto* self = static_cast<RingPoller*>(self_ptr);
  mt_alloc_event r;
  Event e;
  if (size < sizeof(r)) {
    ++self->malformed_records_;
    return 0;
  }
  std::memcpy(&r, data, sizeof(r));
  if (!event_from_wire(r, &e)) {
    if (memory_type(r.kind, &e.type)) return on_memory_record(self, data);
    ++self->malformed_records_;
    return 0;
  }
  self->order_.add(std::move(e));
  ++self->events_received_;
  return 0;
}

int RingPoller::on_memory_record(RingPoller* self, const void* data) {
  mt_memory_event r;
  std::memcpy(&r, data, sizeof(r));
  Event e;
  memory_type(r.kind, &e.type);
  e.pid = r.pid;
  e.tid = r.tid;
  e.timestamp = r.timestamp;
  e.addr = r.addr;
  e.size = r.size;
  e.old_addr = r.old_addr;
  e.old_size = r.old_size;
  e.member = static_cast<int32_t>(r.member);
  self->order_.add(std::move(e));
  ++self->events_received_;
  return 0;
}

// A raw copy unwound offline ends frame-limit where the walkers' chains do.
static_assert(kMaxStackFrames == MT_MAX_FRAMES);

static StackEnd stack_end_of(uint32_t end) {
  switch (end) {
    case MT_END_COMPLETE: return StackEnd::Complete;
    case MT_END_TRUNCATED: return StackEnd::Truncated;
    case MT_END_FRAME_LIMIT: return StackEnd::FrameLimit;
    case MT_END_NO_MODULE: return StackEnd::NoModule;
    case MT_END_NO_RULE: return StackEnd::NoRule;
    case MT_END_UNSUPPORTED: return StackEnd::Unsupported;
    case MT_END_BAD_FRAME: return StackEnd::BadFrame;
    default: return StackEnd::NotWalked;
  }
}

// An event of a stack definition's thread, at its time.
static Event event_of(EventType type, const mt_stack_header& h) {
  Event e;
  e.type = type;
  e.pid = h.pid;
  e.tid = h.tid;
  e.timestamp = h.timestamp;
  return e;
}

int RingPoller::on_stack_record(void* self_ptr, void* data, size_t size) {
  auto* self = static_cast<RingPoller*>(self_ptr);
  mt_stack_header h;
  if (size < sizeof(h)) {
    ++self->malformed_records_;
    return 0;
  }
  std::memcpy(&h, data, sizeof(h));
  const uint8_t* body = static_cast<const uint8_t*>(data) + sizeof(h);
  uint64_t python_at = sizeof(h) + uint64_t(h.frames) * 8 + h.raw_len + uint64_t(h.fp_frames) * 8;
  if (h.frames > MT_MAX_FRAMES || h.fp_frames > MT_MAX_FP_FRAMES || h.py_frames > MT_MAX_PYTHON_FRAMES ||
      python_at + uint64_t(h.py_frames) * sizeof(mt_python_frame) > size) {
    ++self->malformed_records_;
    return 0;
  }
  auto stack = std::make_shared<StackDefinition>();
  stack->hash = h.hash;
  // memcpy into an empty vector's null data() is undefined even for 0 bytes
  // (the interposer's raw definitions have no frame-pointer chain).
  auto copy_words = [](std::vector<uint64_t>& to, const uint8_t* from, size_t words) {
    to.resize(words);
    if (words) std::memcpy(to.data(), from, words * 8);
  };
  copy_words(stack->chain, body, h.frames);
  stack->end = stack_end_of(h.end);
  stack->miss_pc = h.miss_pc;
  if (h.raw_len) {
    stack->sp = h.sp;
    stack->regs.assign(std::begin(h.regs), std::end(h.regs));
    stack->bytes.assign(body + h.frames * 8ull, body + h.frames * 8ull + h.raw_len);
    stack->truncated = h.truncated != 0;
    copy_words(stack->fp_chain, body + h.frames * 8ull + h.raw_len, h.fp_frames);
  }
  if ((h.end == MT_END_NO_RULE || h.end == MT_END_NO_MODULE) && h.raw_len)
    self->learner_->submit_miss(static_cast<pid_t>(h.pid), stack, h.stopped == MT_STACK_STOPPED,
                                h.stopped != MT_STACK_NOT_WAITING);
  const uint8_t* python = static_cast<const uint8_t*>(data) + python_at;
  for (uint32_t i = 0; i < h.py_frames; ++i) {
    mt_python_frame frame;
    std::memcpy(&frame, python + i * sizeof(frame), sizeof(frame));
    stack->python_frames.push_back(frame.code);
    stack->python_frames.push_back(uint64_t(frame.native_index) << 32 | frame.instruction);
  }
  // The code objects first: the Stack record names them.
  if (!self->take_python_codes(h, python + uint64_t(h.py_frames) * sizeof(mt_python_frame),
                               static_cast<const uint8_t*>(data) + size))
    ++self->malformed_records_;
  Event e = event_of(EventType::Stack, h);
  e.stack = std::move(stack);
  self->order_.add(std::move(e));
  ++self->events_received_;
  return 0;
}

bool RingPoller::take_python_codes(const mt_stack_header& h, const uint8_t* at, const uint8_t* end) {
  for (uint32_t i = 0; i < h.py_codes; ++i) {
    mt_python_code c;
    if (end - at < static_cast<std::ptrdiff_t>(sizeof(c))) return false;
    std::memcpy(&c, at, sizeof(c));
    uint64_t bytes = mt_python_code_size(&c);
    if (uint64_t(end - at) < bytes) return false;
    auto code = std::make_shared<PythonCode>();
    const char* text = reinterpret_cast<const char*>(at + sizeof(c));
    code->id = c.id;
    code->first_line = c.first_line;
    code->name.assign(text, c.name_len);
    code->qualname.assign(text + c.name_len, c.qualname_len);
    code->filename.assign(text + c.name_len + c.qualname_len, c.filename_len);
    const uint8_t* table = at + sizeof(c) + c.name_len + c.qualname_len + c.filename_len;
    code->line_table.assign(table, table + c.line_table_len);
    code->line_table_cut = c.line_table_cut != 0;
    Event e = event_of(EventType::PythonCode, h);
    e.python_code = std::move(code);
    order_.add(std::move(e));
    ++events_received_;
    at += bytes;
  }
  return true;
}

int RingPoller::on_process_record(void* self_ptr, void* data, size_t size) {
  auto* self = static_cast<RingPoller*>(self_ptr);
  if (size < sizeof(mt_process_event)) {
    ++self->malformed_records_;
    return 0;
  }
  const auto& r = *static_cast<const mt_process_event*>(data);
  Event e;
  e.pid = r.pid;
  e.tid = r.tid;
  e.timestamp = r.timestamp;
  switch (r.kind) {
    case MT_ATTACH_REQUEST:
      self->attacher_.submit(static_cast<pid_t>(r.pid), (r.flags & MT_REQUEST_RENEW) != 0);
      return 0;
    case MT_RESTORE_RETURNS:
      if (!restore_return_addresses(static_cast<pid_t>(r.pid), r.restore, (r.flags & MT_RECORD_STOPPED) != 0,
                                    self->session_))
        ++self->unwind_restores_failed_;
      return 0;
    case MT_INTERPOSED:
      if (self->ever_interposed_.insert(static_cast<pid_t>(r.pid)).second) ++self->interposed_processes_;
      self->attacher_.submit_interposed(static_cast<pid_t>(r.pid));
      if (!self->interposed_.insert(static_cast<pid_t>(r.pid)).second) return 0;
      e.type = EventType::Interposed;
      break;
    case MT_FORK:
      e.type = EventType::Fork;
      e.parent_pid = r.parent_pid;
      if (self->interposed_.count(static_cast<pid_t>(r.parent_pid))) {
        self->interposed_.insert(static_cast<pid_t>(r.pid));
        if (self->ever_interposed_.insert(static_cast<pid_t>(r.pid)).second) ++self->interposed_processes_;
      }
      // The kernel stopped the child: it needs its own probes first.
      if (self->session_.per_process()) self->attacher_.submit(static_cast<pid_t>(r.pid));
      break;
    case MT_EXEC:
      e.type = EventType::Exec;
      e.image = image_of(r);
      self->interposed_.erase(static_cast<pid_t>(r.pid));
      if (self->interposer_) self->interposer_->process_gone(static_cast<pid_t>(r.pid), r.timestamp);
      break;
    case MT_EXIT:
      e.type = EventType::Exit;
      e.exit_code = r.exit_code;
      self->interposed_.erase(static_cast<pid_t>(r.pid));
      if (self->interposer_) self->interposer_->process_gone(static_cast<pid_t>(r.pid), r.timestamp);
      self->attacher_.process_exited(static_cast<pid_t>(r.pid));
      break;
    default:
      ++self->malformed_records_;
      return 0;
  }
  self->order_.add(std::move(e));
  ++self->events_received_;
  return 0;
}

void RingPoller::run() {
  for (;;) {
    bool last = stopping_.load();
    // Events left in the chunks for want of room (their threads may be
    // waiting): drain more as soon as the sink has some.
    if (interposer_behind_)
      interposer_room_(std::chrono::milliseconds(kPollMs));
    else
      wait_for_data(last ? 0 : kPollMs);
    const size_t room = interposer_room_ ? interposer_room_(std::chrono::milliseconds(0)) : SIZE_MAX;
    // Everything stamped before this instant is consumed below. The margin
    // covers records stamped but not yet committed when the ring is read
    // (their program was preempted between the two).
    uint64_t watermark = last ? UINT64_MAX : monotonic_ns() - kCommitMarginNs;
    if (interposer_) interposer_->take_clock_reading();
    ring_buffer__consume(rings_);
    // Definitions before the events that use them, as on the rings.
    if (interposer_stacks_)
      interposer_stacks_->drain(
          [this](void* record, size_t size) {
            // Stamped in the interposers' clock (the ring's bytes are ours
            // until the tail moves past them).
            if (interposer_ && size >= sizeof(mt_stack_header)) {
              auto* stamp = static_cast<uint8_t*>(record) + offsetof(mt_stack_header, timestamp);
              uint64_t t;
              std::memcpy(&t, stamp, sizeof(t));
              t = interposer_->event_time(t);
              std::memcpy(stamp, &t, sizeof(t));
            }
            on_stack_record(this, record, size);
          },
          interposer_ ? interposer_->chunks_used() : MT_SHM_CHUNKS);
    uint64_t drained_to = watermark;
    if (interposer_) drained_to = interposer_->drain(order_, watermark, room);
    interposer_behind_ = drained_to < watermark;
    for (Event& e : mappings_.drain(watermark)) order_.add(std::move(e));
    {
      std::lock_guard lock(posted_mutex_);
      for (Event& e : posted_) order_.add(std::move(e));
      posted_.clear();
    }
    flush(drained_to, drained_to == UINT64_MAX);
    uint64_t generation = session_.pause_generation();
    if (generation != last_pause_generation_) {
      last_pause_generation_ = generation;
      resumed_producers_ += session_.resume_paused();
    }
    if (last && !interposer_behind_) return;
  }
}

void RingPoller::flush(uint64_t watermark, bool everything) {
  if (batch_.capacity() == 0 && spare_batch_) batch_ = spare_batch_();
  order_.take(watermark, everything, batch_);
  if (!batch_.empty()) sink_(std::exchange(batch_, {}));
  if (!everything) handed_through_.store(watermark);
}

std::map<std::string, uint64_t> RingPoller::counters() const {
  return {
      {"events_received", events_received_.load()},
      {"malformed_records_dropped", malformed_records_.load()},
      {"producers_resumed", resumed_producers_.load()},
      {"unwind_restores_failed", unwind_restores_failed_.load()},
      {"interposed_processes", interposed_processes_.load()},
  };
}

}  // namespace memtrack
