#include "analyze/process_heap.h"

namespace memtrack {

ProcessHeap::ProcessHeap(int32_t pid, uint64_t birth_ns)
    : pid_(pid), birth_ns_(birth_ns), last_event_ns_(birth_ns) {}

void ProcessHeap::fork_from(int32_t parent_pid, const ProcessHeap* parent) {
  parent_pid_ = parent_pid;
  if (parent == nullptr) return;
  command_ = parent->command_;
  exe_ = parent->exe_;
  live_ = parent->live_;
  for (auto& [addr, block] : live_) block.inherited = true;
  inherited_live_ = {parent->live_bytes(), live_.size()};
  figures_.peak_memory = live_bytes();
  figures_.peak_time_ns = birth_ns_;
}

void ProcessHeap::on_event(const Event& event) {
  last_event_ns_ = event.timestamp;
  if (last_allocation_by_tid_.try_emplace(event.tid, 0).second) ++figures_.threads;
  switch (event.type) {
    case EventType::Malloc:
    case EventType::Calloc:
    case EventType::Realloc:
    case EventType::AlignedAlloc:
      allocate(event);
      break;
    case EventType::Free:
      release(event);
      break;
    case EventType::Exec:
      discard_address_space();
      if (event.image) set_image(*event.image);
      break;
    case EventType::Exit:
      exit_code_ = event.exit_code;
      close();
      break;
    case EventType::Fork:     // the analyzer already called fork_from
    case EventType::Mapping:  // the analyzer does not pass these two on
    case EventType::Stack:
      break;
  }
  if (live_bytes() > figures_.peak_memory) {
    figures_.peak_memory = live_bytes();
    figures_.peak_time_ns = event.timestamp;
  }
}

void ProcessHeap::allocate(const Event& event) {
  switch (event.type) {
    case EventType::Malloc: ++figures_.calls.malloc; break;
    case EventType::Calloc: ++figures_.calls.calloc; break;
    case EventType::Realloc: ++figures_.calls.realloc; break;
    default: ++figures_.calls.aligned_alloc; break;  // the only other allocation type
  }
  figures_.total_allocated += event.size;
  figures_.histogram.add(event.size);
  // A realloc that failed (NULL for a non-zero size) left its old block as
  // it was; realloc(p, 0) returning NULL freed it.
  bool old_block_released = event.addr != 0 || event.size == 0;
  if (event.type == EventType::Realloc && event.old_addr != 0 && old_block_released &&
      !take_block(event.old_addr)) {
    ++figures_.unmatched_frees;
  }
  // A failed allocation (addr 0) still ends the thread's pending temporary.
  last_allocation_by_tid_[event.tid] = event.addr;
  if (event.addr == 0) return;
  // A block already live at this address lost its Free record; replace it.
  take_block(event.addr);
  live_.emplace(event.addr, LiveBlock{event.size, event.tid, false});
  own_live_.bytes += event.size;
  ++own_live_.count;
}

void ProcessHeap::release(const Event& event) {
  ++figures_.free_calls;
  if (event.addr == 0) return;  // free(NULL) is a no-op, not an unmatched free
  std::optional<LiveBlock> block = take_block(event.addr);
  if (!block) {
    ++figures_.unmatched_frees;
    return;
  }
  if (block->inherited) return;
  // Temporary: freed before its allocating thread allocated again.
  auto last = last_allocation_by_tid_.find(block->allocating_tid);
  if (last != last_allocation_by_tid_.end() && last->second == event.addr) {
    ++figures_.temporary_allocations;
    last->second = 0;
  }
}

std::optional<ProcessHeap::LiveBlock> ProcessHeap::take_block(uint64_t addr) {
  auto it = live_.find(addr);
  if (it == live_.end()) return std::nullopt;
  LiveBlock block = it->second;
  live_.erase(it);
  Tally& tally = block.inherited ? inherited_live_ : own_live_;
  tally.bytes -= block.size;
  --tally.count;
  return block;
}

void ProcessHeap::discard_address_space() {
  figures_.leaked_bytes += own_live_.bytes;
  figures_.leaked_count += own_live_.count;
  figures_.inherited_unfreed_bytes += inherited_live_.bytes;
  figures_.inherited_unfreed_count += inherited_live_.count;
  own_live_ = {};
  inherited_live_ = {};
  // Swap rather than clear() so the bucket array is released too.
  decltype(live_)().swap(live_);
}

void ProcessHeap::set_image(const ProcessImage& image) {
  if (!image.argv.empty()) {
    command_.clear();
    for (const std::string& arg : image.argv) {
      if (!command_.empty()) command_ += ' ';
      command_ += arg;
    }
  } else if (!image.path.empty()) {
    command_ = image.path;
  } else {
    command_ = image.comm;
  }
  exe_ = image.path;
}

void ProcessHeap::close() {
  discard_address_space();
  std::unordered_map<int32_t, uint64_t>().swap(last_allocation_by_tid_);
  ended_ = true;
}

ProcessReport ProcessHeap::to_report(uint64_t start_monotonic_ns) const {
  ProcessReport report;
  report.pid = pid_;
  report.parent_pid = parent_pid_;
  report.command = command_;
  report.exe = exe_;
  report.start_time_ns = ns_since(birth_ns_, start_monotonic_ns);
  report.exit_code = exit_code_;
  report.figures = figures_;
  HeapFigures& figures = report.figures;
  if (!ended_) {  // the trace ended first: what is still live counts now
    figures.leaked_bytes += own_live_.bytes;
    figures.leaked_count += own_live_.count;
    figures.inherited_unfreed_bytes += inherited_live_.bytes;
    figures.inherited_unfreed_count += inherited_live_.count;
  }
  if (figures.peak_memory == 0) {
    figures.peak_time_ns.reset();
  } else {
    figures.peak_time_ns = ns_since(*figures.peak_time_ns, start_monotonic_ns);
  }
  figures.duration_ns = ns_since(last_event_ns_, birth_ns_);
  return report;
}

}  // namespace memtrack
