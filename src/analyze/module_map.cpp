#include "analyze/module_map.h"

#include <iterator>

namespace memtrack {

namespace {

// The same file mapped the same way: new_image aside, every field agrees.
bool same_mapping(const MappingInfo& a, const MappingInfo& b) {
  return a.len == b.len && a.file_offset == b.file_offset && a.dev == b.dev && a.ino == b.ino &&
         a.build_id == b.build_id && a.prot == b.prot && a.path == b.path;
}

}  // namespace

void ModuleMap::on_event(const Event& event) {
  switch (event.type) {
    case EventType::Mapping:
      add_mapping(processes_[event.pid], event);
      break;
    case EventType::Fork: {
      Process& child = processes_[event.pid];
      end_all(child, event.timestamp);  // a reused pid whose Exit was not seen
      child.image_replaced = false;
      auto parent = processes_.find(event.parent_pid);
      if (parent == processes_.end() || event.parent_pid == event.pid) break;
      for (const auto& [start, index] : parent->second.live) {
        Placement inherited = parent->second.placements[index];
        inherited.from_ns = event.timestamp;
        child.live.emplace(start, child.placements.size());
        child.placements.push_back(std::move(inherited));
      }
      child.changed_ns = event.timestamp;
      break;
    }
    case EventType::Exec: {
      auto process = processes_.find(event.pid);
      if (process == processes_.end()) break;
      // After a new_image Mapping the live placements are the new image's.
      if (!process->second.image_replaced) end_all(process->second, event.timestamp);
      process->second.image_replaced = false;
      break;
    }
    case EventType::Exit: {
      auto process = processes_.find(event.pid);
      if (process == processes_.end()) break;
      end_all(process->second, event.timestamp);
      process->second.image_replaced = false;
      break;
    }
    default:
      break;  // allocation records
  }
}

void ModuleMap::add_mapping(Process& process, const Event& event) {
  if (!event.mapping) return;
  const MappingInfo& info = *event.mapping;
  const uint64_t start = event.addr;
  uint64_t end_address;
  // An empty range or one past the address space places nothing.
  if (info.len == 0 || __builtin_add_overflow(start, info.len, &end_address)) return;
  if (info.new_image) {
    end_all(process, event.timestamp);
    process.image_replaced = true;
  }
  // The first live placement that may overlap: the one starting at or before
  // `start` if it reaches past it, else the first one starting after.
  auto overlapping = process.live.lower_bound(start);
  if (overlapping != process.live.begin()) {
    auto before = std::prev(overlapping);
    if (process.placements[before->second].end > start) overlapping = before;
  }
  if (overlapping != process.live.end() && overlapping->first == start) {
    const Placement& same_start = process.placements[overlapping->second];
    if (same_start.end == end_address && same_mapping(*same_start.mapping, info)) return;
  }
  while (overlapping != process.live.end() && overlapping->first < end_address)
    overlapping = end(process, overlapping, event.timestamp);
  process.live.emplace(start, process.placements.size());
  process.placements.push_back(Placement{start, end_address, event.timestamp, Placement::kOpen, event.mapping});
  process.changed_ns = event.timestamp;
}

void ModuleMap::end_all(Process& process, uint64_t timestamp) {
  for (auto live = process.live.begin(); live != process.live.end();) live = end(process, live, timestamp);
}

std::map<uint64_t, size_t>::iterator ModuleMap::end(Process& process, std::map<uint64_t, size_t>::iterator live,
                                                    uint64_t timestamp) {
  process.placements[live->second].to_ns = timestamp;
  process.changed_ns = timestamp;
  return process.live.erase(live);
}

const Placement* ModuleMap::placement_at(int32_t pid, uint64_t address, uint64_t timestamp) const {
  auto found = processes_.find(pid);
  if (found == processes_.end()) return nullptr;
  const Process& process = found->second;
  if (timestamp >= process.changed_ns) {
    // Nothing changed since: the live placements are the answer.
    auto after = process.live.upper_bound(address);
    if (after == process.live.begin()) return nullptr;
    const Placement& candidate = process.placements[std::prev(after)->second];
    return candidate.contains(address) ? &candidate : nullptr;
  }
  for (auto it = process.placements.rbegin(); it != process.placements.rend(); ++it)
    if (it->live_at(timestamp) && it->contains(address)) return &*it;
  return nullptr;
}

std::span<const Placement> ModuleMap::placements(int32_t pid) const {
  auto found = processes_.find(pid);
  if (found == processes_.end()) return {};
  return found->second.placements;
}

}  // namespace memtrack
