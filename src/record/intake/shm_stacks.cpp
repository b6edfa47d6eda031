#include "record/intake/shm_stacks.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <stdexcept>

#include "record/intake/shared_counters.h"
#include "record/system_error.h"
#include "wire/shared_memory.h"
#include "wire/stack_table.h"

namespace memtrack {

InterposerStacks::InterposerStacks(uid_t owner_uid, uint32_t stack_budget) : size_(mt_stacks_size(MT_SHM_CHUNKS)) {
  struct statvfs fs;
  // Sparse, but a definition ring must never fault for want of room.
  if (statvfs("/dev/shm", &fs) != 0 || uint64_t(fs.f_bavail) * fs.f_frsize < size_)
    throw std::runtime_error("/dev/shm has less than " + std::to_string(size_ >> 20) + " MiB free");
  std::random_device random;
  char name[96];
  std::snprintf(name, sizeof(name), "/dev/shm/memtrack-%d-%08x.stacks", getpid(), random());
  path_ = name;
  int fd = open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw system_error("cannot create " + path_);
  if (ftruncate(fd, static_cast<off_t>(size_)) != 0 ||
      (owner_uid != static_cast<uid_t>(-1) && fchown(fd, owner_uid, static_cast<gid_t>(-1)) != 0)) {
    auto error = system_error("cannot set up " + path_);
    close(fd);
    unlink(path_.c_str());
    throw error;
  }
  base_ = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    unlink(path_.c_str());
    throw system_error("cannot map " + path_);
  }
  auto* header = static_cast<mt_stacks_header*>(base_);
  header->version = MT_STACKS_VERSION;
  header->stack_budget = stack_budget;
  __atomic_store_n(&header->magic, MT_STACKS_MAGIC, __ATOMIC_RELEASE);
}

InterposerStacks::~InterposerStacks() {
  munmap(base_, size_);
  remove_file();
}

void InterposerStacks::remove_file() {
  if (!file_removed_) unlink(path_.c_str());
  file_removed_ = true;
}

void name_stacks_file(std::vector<std::string>& environment, const InterposerStacks* stacks) {
  std::erase_if(environment, [](const std::string& entry) { return entry.starts_with(MT_STACKS_ENV "="); });
  if (stacks) environment.push_back(MT_STACKS_ENV "=" + stacks->path_);
}

void InterposerStacks::set_module_table(pid_t pid, const mt_module_table& table) {
  mt_process_slot* slots = mt_stacks_processes(base_);
  uint64_t home = mt_stacks_process_home(static_cast<uint32_t>(pid));
  mt_process_slot* free_slot = nullptr;
  for (uint32_t i = 0; i < MT_STACKS_PROCESS_SLOTS; ++i) {
    mt_process_slot* s = &slots[(home + i) & (MT_STACKS_PROCESS_SLOTS - 1)];
    uint32_t owner = s->pid;
    if (owner == static_cast<uint32_t>(pid)) {
      // A seqlock: readers that saw the old table redo nothing, they go raw.
      __atomic_store_n(&s->sequence, s->sequence + 1, __ATOMIC_RELAXED);
      __atomic_thread_fence(__ATOMIC_RELEASE);
      std::memcpy(&s->table, &table, sizeof(table));
      __atomic_store_n(&s->sequence, s->sequence + 1, __ATOMIC_RELEASE);
      return;
    }
    if (!free_slot && (owner == 0 || owner == MT_STACKS_PID_GONE)) free_slot = s;
    if (owner == 0) break;
  }
  if (!free_slot) {
    ++processes_not_stored_;  // its walks stop at once and go raw
    return;
  }
  std::memcpy(&free_slot->table, &table, sizeof(table));
  __atomic_store_n(&free_slot->pid, static_cast<uint32_t>(pid), __ATOMIC_RELEASE);
}

void InterposerStacks::forget(pid_t pid) {
  mt_process_slot* slots = mt_stacks_processes(base_);
  uint64_t home = mt_stacks_process_home(static_cast<uint32_t>(pid));
  for (uint32_t i = 0; i < MT_STACKS_PROCESS_SLOTS; ++i) {
    mt_process_slot* s = &slots[(home + i) & (MT_STACKS_PROCESS_SLOTS - 1)];
    if (s->pid == 0) return;
    if (s->pid != static_cast<uint32_t>(pid)) continue;
    __atomic_store_n(&s->sequence, s->sequence + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    s->table.count = 0;
    __atomic_store_n(&s->sequence, s->sequence + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&s->pid, MT_STACKS_PID_GONE, __ATOMIC_RELEASE);
    return;
  }
}

size_t InterposerStacks::add_rules(const std::vector<mt_rule_key>& keys, const std::vector<mt_unwind_rule>& rules) {
  mt_rule_slot* slots = mt_stacks_rules(base_);
  size_t stored = 0;
  for (size_t k = 0; k < keys.size() && k < rules.size(); ++k) {
    uint64_t home = mt_stacks_rule_home(keys[k].file_id, keys[k].file_offset);
    bool placed = false;
    for (uint32_t i = 0; i < MT_STACKS_RULE_PROBES && !placed; ++i) {
      mt_rule_slot* s = &slots[(home + i) & (MT_STACKS_RULE_SLOTS - 1)];
      if (s->file_id_plus_one == 0) {
        s->file_offset = keys[k].file_offset;
        s->rule = rules[k];
        __atomic_store_n(&s->file_id_plus_one, keys[k].file_id + 1, __ATOMIC_RELEASE);
        placed = true;
      } else if (s->file_id_plus_one == keys[k].file_id + 1 && s->file_offset == keys[k].file_offset) {
        placed = true;  // given before
      }
    }
    if (placed)
      ++stored;
    else
      ++rules_not_stored_;
  }
  return stored;
}

size_t InterposerStacks::add_file_rules(const std::vector<mt_rule_key>& keys,
                                        const std::vector<mt_unwind_rule>& rules) {
  size_t count = std::min(keys.size(), rules.size());
  if (count == 0) return 0;
  uint32_t file_id = keys[0].file_id;
  std::vector<size_t> order(count);
  for (size_t i = 0; i < count; ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return keys[a].file_offset < keys[b].file_offset; });
  uint64_t low = keys[order.front()].file_offset, high = keys[order.back()].file_offset;
  uint64_t base = low & ~uint64_t{4095};
  uint64_t pages = ((high - base) >> 12) + 1;
  uint64_t bytes = 4 * ((pages + 2) & ~uint64_t{1}) + count * sizeof(mt_region_rule);
  mt_file_rules* file = &mt_stacks_files(base_)[file_id];
  bool fits = file_id < MT_STACKS_FILES && file->count == 0 && high <= UINT32_MAX && count <= UINT32_MAX &&
              std::all_of(keys.begin(), keys.begin() + count, [&](const mt_rule_key& k) { return k.file_id == file_id; }) &&
              bytes <= MT_STACKS_REGION_BYTES - region_bytes_used_;
  if (!fits) return add_rules(keys, rules);
  file->pages = static_cast<uint32_t>(pages);
  file->base = base;
  file->index = region_bytes_used_;
  // Placed by the recorder's own numbers, never read back from the entry
  // (memory the recorded processes can write: a changed index would have the
  // recorder write anywhere).
  auto* index = reinterpret_cast<uint32_t*>(static_cast<char*>(base_) + MT_STACKS_REGIONS_OFFSET + region_bytes_used_);
  mt_region_rule* region = mt_region_rules(index, static_cast<uint32_t>(pages));
  size_t stored = 0;
  uint64_t page = 0;
  index[0] = 0;
  for (size_t i : order) {
    if (stored > 0 && region[stored - 1].file_offset == keys[i].file_offset) continue;  // given twice
    for (uint64_t p = (keys[i].file_offset - base) >> 12; page < p; ++page) index[page + 1] = static_cast<uint32_t>(stored);
    region[stored++] = {static_cast<uint32_t>(keys[i].file_offset), rules[i]};
  }
  for (; page < pages; ++page) index[page + 1] = static_cast<uint32_t>(stored);
  region_bytes_used_ += (bytes + 63) & ~uint64_t{63};
  rules_in_regions_ += stored;
  __atomic_store_n(&file->count, static_cast<uint32_t>(stored), __ATOMIC_RELEASE);
  return count;
}

void InterposerStacks::drain(const std::function<void(void* record, size_t size)>& take, uint32_t rings) {
  for (uint32_t i = 0; i < std::min(rings, MT_SHM_CHUNKS); ++i) {
    mt_stack_ring* ring = mt_stacks_ring(base_, i);
    uint64_t head = __atomic_load_n(&ring->head, __ATOMIC_ACQUIRE);
    uint64_t tail = ring->tail;
    if (head == tail) continue;
    if (head - tail > MT_STACKS_RING_BYTES || (head & 7)) {  // a producer wrote nonsense
      ++malformed_;
      __atomic_store_n(&ring->tail, head, __ATOMIC_RELEASE);
      continue;
    }
    while (tail != head) {
      uint64_t position = tail & (MT_STACKS_RING_BYTES - 1);
      uint32_t length;
      std::memcpy(&length, ring->bytes + position, sizeof(length));
      if (length == 0) {  // padding to the end of the ring
        tail += MT_STACKS_RING_BYTES - position;
        continue;
      }
      uint64_t need = (8 + uint64_t(length) + 7) & ~uint64_t{7};
      if (position + need > MT_STACKS_RING_BYTES || need > head - tail) {
        ++malformed_;
        tail = head;
        break;
      }
      take(ring->bytes + position + 8, length);
      tail += need;
    }
    __atomic_store_n(&ring->tail, tail, __ATOMIC_RELEASE);
  }
}

std::map<std::string, uint64_t> InterposerStacks::counters() const {
  const auto* h = static_cast<const mt_stacks_header*>(base_);
  auto load = [](const uint64_t& v) { return __atomic_load_n(&v, __ATOMIC_RELAXED); };
  std::map<std::string, uint64_t> counters = {
      {"interposer_rules_not_stored", rules_not_stored_},
      {"interposer_rules_in_regions", rules_in_regions_},
      {"interposer_module_tables_not_stored", processes_not_stored_},
      {"interposer_stack_malformed_dropped", malformed_},
  };
  // The interposers' own, in memory the recorded processes can write.
  add_shared_counters(counters,
                      {{"interposer_stack_definitions", load(h->definitions)},
                       {"interposer_stack_definitions_lost", load(h->definitions_lost)},
                       {"interposer_stack_ring_waits", load(h->ring_waits)},
#define MT_WALK(name) {"interposer_" #name, load(h->name)},
                       MT_WALK_COUNTERS(MT_WALK)
#undef MT_WALK
                       {"interposer_walks_table_changed", load(h->table_changed)},
                       {"interposer_stack_rewalks", load(h->rewalks)},
                       {"interposer_walks_repeated", load(h->walks_repeated)},
                       {"interposer_walks_joined", load(h->walks_joined)},
                       {"interposer_seen_set_full", load(h->seen_set_full)},
                       {"interposer_python_processes", load(h->python_processes)},
                       {"interposer_python_refused_version", load(h->python_refused_version)},
                       {"interposer_python_refused_layout", load(h->python_refused_layout)},
                       {"interposer_python_pymalloc", load(h->python_pymalloc)},
                       {"interposer_python_frames_cut", load(h->python_frames_cut)},
                       {"interposer_python_codes", load(h->python_codes)},
                       {"interposer_python_codes_deferred", load(h->python_codes_deferred)}},
                      "interposer_stack_counters_implausible");
  return counters;
}

}  // namespace memtrack
