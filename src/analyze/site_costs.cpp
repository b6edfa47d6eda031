#include "analyze/site_costs.h"

#include <algorithm>

#include "analyze/report.h"

namespace memtrack {

bool EventFilter::selects(const Event& allocation, uint64_t start_monotonic_ns) const {
  if (!pids.empty() && std::find(pids.begin(), pids.end(), allocation.pid) == pids.end()) return false;
  if (!tids.empty() && std::find(tids.begin(), tids.end(), allocation.tid) == tids.end()) return false;
  uint64_t t = ns_since(allocation.timestamp, start_monotonic_ns);
  if (from_ns && t < *from_ns) return false;
  if (to_ns && t > *to_ns) return false;
  return true;
}

SiteCostTracker::SiteCostTracker(EventFilter filter, uint64_t start_monotonic_ns)
    : filter_(std::move(filter)), start_ns_(start_monotonic_ns) {}

void SiteCostTracker::on_event(const Event& event, uint64_t site) {
  now_ = event.timestamp;
  switch (event.type) {
    case EventType::Malloc:
    case EventType::Calloc:
    case EventType::Realloc:
    case EventType::AlignedAlloc:
      allocate(event, site);
      break;
    case EventType::Free:
      if (event.addr != 0) {
        auto process = processes_.find(event.pid);
        if (process != processes_.end()) release(process->second, event.addr, true);
      }
      break;
    case EventType::Exec:
      leak_all(event.pid, false);
      break;
    case EventType::Exit:
    case EventType::Fork:  // a child pid still known lost its Exit record; inherited blocks stay the parent's
      leak_all(event.pid, true);
      break;
    case EventType::Mapping:
    case EventType::Stack:
      break;
  }
}

void SiteCostTracker::allocate(const Event& event, uint64_t site) {
  Process& process = processes_[event.pid];
  // A failed realloc (NULL for a non-zero size) left its old block as it was.
  bool old_block_released = event.addr != 0 || event.size == 0;
  if (event.type == EventType::Realloc && event.old_addr != 0 && old_block_released)
    release(process, event.old_addr, false);
  // Any allocation of the thread, selected or not, ends its pending temporary.
  process.last_allocation_by_tid[event.tid] = event.addr;
  if (!filter_.selects(event, start_ns_)) return;

  SiteCosts& costs = costs_[site];
  ++costs.allocations;
  costs.allocated_bytes += event.size;
  if (event.addr == 0) return;
  // A block already live at this address lost its Free record; replace it.
  if (process.blocks.contains(event.addr)) release(process, event.addr, false);
  process.blocks.emplace(event.addr, Block{event.size, site, event.tid});
  Live& live = touch(site);
  live.bytes += event.size;
  ++live.count;
  live_bytes_ += event.size;
  after_change();
}

void SiteCostTracker::release(Process& process, uint64_t addr, bool count_temporary) {
  auto it = process.blocks.find(addr);
  if (it == process.blocks.end()) return;  // not selected, or allocated before the recording
  Block block = it->second;
  process.blocks.erase(it);
  if (count_temporary) {
    auto last = process.last_allocation_by_tid.find(block.tid);
    if (last != process.last_allocation_by_tid.end() && last->second == addr) {
      SiteCosts& costs = costs_[block.site];
      ++costs.temporary_allocations;
      costs.temporary_bytes += block.size;
      last->second = 0;
    }
  }
  Live& live = touch(block.site);
  live.bytes -= block.size;
  --live.count;
  live_bytes_ -= block.size;
  after_change();
}

void SiteCostTracker::leak_all(int32_t pid, bool forget) {
  auto process = processes_.find(pid);
  if (process == processes_.end()) return;
  for (const auto& [addr, block] : process->second.blocks) {
    SiteCosts& costs = costs_[block.site];
    costs.leaked_bytes += block.size;
    ++costs.leaked_allocations;
    Live& live = touch(block.site);
    live.bytes -= block.size;
    --live.count;
    live_bytes_ -= block.size;
  }
  if (forget) {
    processes_.erase(process);
  } else {
    process->second.blocks = {};
    process->second.last_allocation_by_tid = {};  // exec leaves one thread, in a new image
  }
  after_change();
}

SiteCostTracker::Live& SiteCostTracker::touch(uint64_t stack) {
  Live& live = live_[stack];
  // Unchanged since the latest peak: what it holds now is its value then.
  if (live.changed <= peak_sequence_) {
    live.at_peak_bytes = live.bytes;
    live.at_peak_count = live.count;
  }
  live.changed = ++sequence_;
  return live;
}

void SiteCostTracker::after_change() {
  if (live_bytes_ <= peak_bytes_) return;
  peak_bytes_ = live_bytes_;
  peak_sequence_ = sequence_;
  peak_timestamp_ = now_;
}

void SiteCostTracker::finish() {
  if (finished_) return;
  finished_ = true;
  std::vector<int32_t> pids;
  for (const auto& [pid, process] : processes_) pids.push_back(pid);
  for (int32_t pid : pids) leak_all(pid, true);
  for (auto& [stack, live] : live_) {
    bool unchanged_since_peak = live.changed <= peak_sequence_;
    SiteCosts& costs = costs_[stack];
    costs.peak_bytes = unchanged_since_peak ? live.bytes : live.at_peak_bytes;
    costs.peak_allocations = unchanged_since_peak ? live.count : live.at_peak_count;
  }
}

uint64_t SiteCostTracker::peak_time_ns() const {
  return peak_bytes_ == 0 ? 0 : ns_since(peak_timestamp_, start_ns_);
}

}  // namespace memtrack
