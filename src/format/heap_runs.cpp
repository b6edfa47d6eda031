#include "format/heap_runs.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "format/record_codec.h"

namespace memtrack::records {

using namespace codec;

namespace {

[[gnu::noinline]] void put_long_varint(std::vector<uint8_t>& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<uint8_t>(value | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<uint8_t>(value));
}

// Most of a run's numbers (thread and site indices, tick steps, block
// references) take one byte: that case inline, at every event.
inline void put_varint(std::vector<uint8_t>& out, uint64_t value) {
  if (value < 0x80) [[likely]] {
    out.push_back(static_cast<uint8_t>(value));
    return;
  }
  put_long_varint(out, value);
}

void put_le64(std::vector<uint8_t>& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

uint64_t zigzag(int64_t value) { return (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63); }
int64_t unzigzag(uint64_t value) { return static_cast<int64_t>(value >> 1) ^ -static_cast<int64_t>(value & 1); }

// A column read front to back; every read is bounded by the column.
class ColumnReader {
 public:
  ColumnReader(std::span<const uint8_t> bytes, const char* name) : bytes_(bytes), name_(name) {}
  bool at_end() const { return offset_ == bytes_.size(); }
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (offset_ == bytes_.size()) short_column();
      uint8_t byte = bytes_[offset_++];
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
    throw DecodeError(std::string("a Heap record's ") + name_ + " holds a varint longer than 10 bytes");
  }
  uint64_t le64() {
    if (bytes_.size() - offset_ < 8) short_column();
    uint64_t value = 0;
    for (int i = 0; i < 8; ++i) value |= static_cast<uint64_t>(bytes_[offset_ + i]) << (8 * i);
    offset_ += 8;
    return value;
  }

 private:
  [[noreturn]] void short_column() const {
    throw DecodeError(std::string("a Heap record's ") + name_ + " column ends early");
  }
  std::span<const uint8_t> bytes_;
  size_t offset_ = 0;
  const char* name_;
};

void pack_column(Packer& packer, const FixStr& key, const std::vector<uint8_t>& bytes) {
  packer.pack_str(static_cast<uint32_t>(key.text().size()));
  packer.pack_str_body(key.text().data(), static_cast<uint32_t>(key.text().size()));
  pack_bin(packer, bytes);
}

void pack_number(Packer& packer, const FixStr& key, uint64_t value) {
  packer.pack_str(static_cast<uint32_t>(key.text().size()));
  packer.pack_str_body(key.text().data(), static_cast<uint32_t>(key.text().size()));
  packer.pack_uint64(value);
}

// The map header, `type` and the three numbers: an upper bound.
constexpr size_t kRunOverheadBytes = 128;

}  // namespace

void SiteOrder::add(uint64_t number) {
  if (numbers_.empty() || (numbers_.back() & ~kDead) < number) {
    numbers_.push_back(number);
  } else {
    numbers_.insert(std::lower_bound(numbers_.begin(), numbers_.end(), number,
                                     [](uint64_t entry, uint64_t n) { return (entry & ~kDead) < n; }),
                    number);
  }
}

size_t SiteOrder::index_of(uint64_t number) const {
  // Mostly the newest (the last entry is never a freed one).
  if (!numbers_.empty() && numbers_.back() == number) return numbers_.size() - 1;
  auto it = std::lower_bound(numbers_.begin(), numbers_.end(), number,
                             [](uint64_t entry, uint64_t n) { return (entry & ~kDead) < n; });
  return it != numbers_.end() && *it == number ? static_cast<size_t>(it - numbers_.begin()) : numbers_.size();
}

std::optional<uint64_t> SiteOrder::rank_of(uint64_t number) const { return rank_at(index_of(number)); }

std::optional<uint64_t> SiteOrder::rank_at(size_t index) const {
  if (index == numbers_.size() || numbers_.size() - index > kRankReach) return std::nullopt;
  uint64_t rank = 0;
  for (size_t i = index + 1; i < numbers_.size(); ++i) rank += !(numbers_[i] & kDead);
  return rank;
}

std::optional<uint64_t> SiteOrder::take(uint64_t number) {
  size_t index = index_of(number);
  std::optional<uint64_t> rank = rank_at(index);
  remove_at(index);
  return rank;
}

uint64_t SiteOrder::number_of_rank(uint64_t rank) const {
  const size_t reach = std::min(numbers_.size(), kRankReach);
  for (size_t i = numbers_.size(); i > numbers_.size() - reach; --i) {
    if (numbers_[i - 1] & kDead) continue;
    if (rank-- == 0) return numbers_[i - 1];
  }
  return 0;
}

uint64_t SiteOrder::take_rank(uint64_t rank) {
  const size_t reach = std::min(numbers_.size(), kRankReach);
  for (size_t i = numbers_.size(); i > numbers_.size() - reach; --i) {
    if (numbers_[i - 1] & kDead) continue;
    if (rank-- != 0) continue;
    uint64_t number = numbers_[i - 1];
    remove_at(i - 1);
    return number;
  }
  return 0;
}

bool SiteOrder::remove(uint64_t number) { return remove_at(index_of(number)); }

bool SiteOrder::remove_at(size_t index) {
  if (index == numbers_.size()) return false;
  numbers_[index] |= kDead;
  ++dead_;
  while (!numbers_.empty() && numbers_.back() & kDead) {
    numbers_.pop_back();
    --dead_;
  }
  // Freed entries in the middle (a queue freed oldest first) are dropped
  // once they are half: amortised O(1), and the same on both sides.
  if (dead_ > 64 && dead_ * 2 > numbers_.size()) {
    std::erase_if(numbers_, [](uint64_t entry) { return entry & kDead; });
    dead_ = 0;
  }
  return true;
}

HeapRunEncoder::Process& HeapRunEncoder::process_of(int32_t pid) {
  if (cached_process_ == nullptr || cached_pid_ != pid) {
    cached_process_ = &processes_[pid];
    cached_pid_ = pid;
  }
  return *cached_process_;
}

void HeapRunEncoder::replace_process(int32_t pid, std::optional<Process> with) {
  // Inserting or erasing a process may move the others.
  cached_process_ = nullptr;
  if (auto it = processes_.find(pid); it != processes_.end()) {
    live_bytes_ -= it->second.live_bytes;
    processes_.erase(it);
  }
  if (!with) return;
  live_bytes_ += with->live_bytes;
  processes_.emplace(pid, std::move(*with));
}

void HeapRunEncoder::observe(const Event& event) {
  switch (event.type) {
    case EventType::Fork: {
      auto parent = processes_.find(event.parent_pid);
      replace_process(event.pid, parent == processes_.end() ? Process{} : Process(parent->second));
      break;
    }
    case EventType::Exec: replace_process(event.pid, Process{}); break;
    case EventType::Exit: replace_process(event.pid, std::nullopt); break;
    default: break;
  }
}

uint32_t HeapRunEncoder::site_slot(Process& process, uint64_t size, uint64_t stack_hash) {
  Process::RecentSite& recent =
      process.recent_sites[((size * 0x9e3779b97f4a7c15ULL) ^ stack_hash) >> 58 & (Process::kRecentSites - 1)];
  if (recent.slot != UINT32_MAX && recent.size == size && recent.stack_hash == stack_hash) return recent.slot;
  auto [it, inserted] = process.slots.try_emplace({size, stack_hash}, 0);
  if (!inserted) {
    recent = {size, stack_hash, it->second};
    return it->second;
  }
  uint32_t slot;
  if (!process.free_slots.empty()) {
    slot = process.free_slots.back();
    process.free_slots.pop_back();
  } else {
    slot = static_cast<uint32_t>(process.sites.size());
    process.sites.emplace_back();
  }
  it->second = slot;
  recent = {size, stack_hash, slot};
  SiteState& state = process.sites[slot];
  // The call path's number is given at its first use, as if asked at
  // every allocation: no other site with this hash existed before.
  state = SiteState{};
  state.site = {size, stack_number(stack_hash)};
  state.stack_hash = stack_hash;
  return slot;
}

uint32_t HeapRunEncoder::site_index(SiteState& state) {
  if (state.frame == frame_) return state.index;
  auto [it, inserted] = site_index_.try_emplace(state.site, static_cast<uint32_t>(site_index_.size()));
  if (inserted) {
    put_varint(new_sites_, state.site.first);
    put_varint(new_sites_, state.site.second);
  }
  state.frame = frame_;
  state.index = it->second;
  return it->second;
}

void HeapRunEncoder::encode_block(Process& process, Block block, bool released) {
  SiteState& site = process.site(block);
  put_varint(sites_, site_index(site));
  std::optional<uint64_t> rank = released ? site.order.take(block.number()) : site.order.rank_of(block.number());
  put_varint(refs_, rank ? *rank << 1 : (next_block_ - block.number()) << 1 | 1);
}


void HeapRunEncoder::encode_old_block(Process& process, uint64_t address, bool released, uint8_t& kind) {
  if (address == 0) {
    kind |= heap_kind::kNoOldBlock;
    return;
  }
  auto it = process.blocks.find(address);
  if (it == process.blocks.end()) {
    kind |= heap_kind::kForeignOldBlock;
    put_le64(addresses_, address);
    return;
  }
  const Block block = it->second;
  encode_block(process, block, released);
  if (!released) return;
  process.live_bytes -= process.site(block).site.first;
  live_bytes_ -= process.site(block).site.first;
  process.blocks.erase(it);
}

void HeapRunEncoder::encode_new_block(Process& process, uint64_t address, uint32_t slot, uint8_t& kind) {
  if (address == 0) {
    kind |= heap_kind::kFailed;
    return;
  }
  SiteState& site = process.sites[slot];
  auto [it, inserted] = process.blocks.try_emplace(address, Block(next_block_, slot));
  process.live_bytes += site.site.first;
  live_bytes_ += site.site.first;
  if (inserted) {
    site.order.add(next_block_++);
    return;
  }
  // HeapReplay replaces the block still live here: same number, new site.
  // The reader removes it from its old site, then adds it to the new one.
  kind |= heap_kind::kReusedBlock;
  const Block old = it->second;
  encode_block(process, old, true);
  process.live_bytes -= process.site(old).site.first;
  live_bytes_ -= process.site(old).site.first;
  site.order.add(old.number());
  it->second = Block(old.number(), slot);
}

void HeapRunEncoder::add(const Event& event) {
  // Checked before anything is written: the run stays whole.
  Process& process = process_of(event.pid);
  if (next_block_ >= kMaxBlockNumber)
    throw std::length_error("the compact layout numbers at most 2^40 blocks in a recording: record longer runs "
                            "with --aggregate");
  if (process.sites.size() >= kMaxSlots && process.free_slots.empty() && event.type != EventType::Free)
    throw std::length_error("process " + std::to_string(event.pid) + " has 2^24 allocation sites (size and call "
                            "path) with live blocks, the compact layout's limit: record it with --records-layout");
  const uint64_t tick = event.timestamp / kHeapTickNs;
  if (run_events_ == 0) {
    run_first_block_ = next_block_;
    run_first_tick_ = tick;
    last_tick_ = tick;
  }
  ++run_events_;
  put_varint(ticks_, zigzag(static_cast<int64_t>(tick - last_tick_)));
  last_tick_ = tick;

  const uint64_t thread_key = uint64_t{static_cast<uint32_t>(event.pid)} << 32 | static_cast<uint32_t>(event.tid);
  if (thread_key != last_thread_key_ || last_thread_ == UINT32_MAX) {
    auto [thread, new_thread] = thread_index_.try_emplace(thread_key, static_cast<uint32_t>(thread_index_.size()));
    if (new_thread) {
      put_varint(new_threads_, static_cast<uint32_t>(event.pid));
      put_varint(new_threads_, static_cast<uint32_t>(event.tid));
    }
    last_thread_key_ = thread_key;
    last_thread_ = thread->second;
  }
  put_varint(threads_, last_thread_);

  uint8_t kind = static_cast<uint8_t>(event.type);
  if (event.type == EventType::Free) {
    encode_old_block(process, event.addr, true, kind);
  } else {
    const uint32_t slot = site_slot(process, event.size, event.stack_hash);
    put_varint(sites_, site_index(process.sites[slot]));
    // As HeapReplay: a failed realloc (NULL for a non-zero size) keeps its
    // old block; realloc(p, 0) returning NULL freed it.
    if (event.type == EventType::Realloc)
      encode_old_block(process, event.old_addr, event.addr != 0 || event.size == 0, kind);
    encode_new_block(process, event.addr, slot, kind);
  }
  kinds_.push_back(kind);
}

size_t HeapRunEncoder::run_bytes() const {
  return kRunOverheadBytes + new_threads_.size() + new_sites_.size() + kinds_.size() + ticks_.size() +
         threads_.size() + sites_.size() + refs_.size() + addresses_.size();
}

void HeapRunEncoder::pack_run(ByteBuffer& out) {
  if (run_events_ == 0) return;
  Packer packer(out);
  packer.pack_map(12);
  pack_str(packer, kType.name.text());
  pack_str(packer, kHeapName.text());
  pack_number(packer, kFirstBlock.name, run_first_block_);
  pack_number(packer, kFirstTick.name, run_first_tick_);
  pack_number(packer, kTickNs.name, kHeapTickNs);
  pack_column(packer, kNewThreads.name, new_threads_);
  pack_column(packer, kNewSites.name, new_sites_);
  pack_column(packer, kKinds.name, kinds_);
  pack_column(packer, kTicks.name, ticks_);
  pack_column(packer, kThreads.name, threads_);
  pack_column(packer, kSites.name, sites_);
  pack_column(packer, kRefs.name, refs_);
  pack_column(packer, kAddresses.name, addresses_);
  run_events_ = 0;
  for (auto* column : {&new_threads_, &new_sites_, &kinds_, &ticks_, &threads_, &sites_, &refs_, &addresses_})
    column->clear();
}

void HeapRunEncoder::start_frame() {
  // Sites without live blocks go now rather than at their last free: most
  // are used again soon (an empty order is as good as a new one).
  for (auto& running : processes_) {
    Process& process = running.second;  // clang 14 cannot capture a structured binding
    process.recent_sites.fill({});  // their slots may be freed below
    absl::erase_if(process.slots, [&process](const auto& entry) {
      if (!process.sites[entry.second].order.empty()) return false;
      process.sites[entry.second] = SiteState{};  // its order's memory too
      process.free_slots.push_back(entry.second);
      return true;
    });
  }
  ++frame_;  // every site's index is of the last frame now
  thread_index_.clear();
  last_thread_ = UINT32_MAX;
  site_index_.clear();
}

uint64_t HeapRunEncoder::stack_number(uint64_t hash) {
  if (hash == 0) return 0;
  return stack_numbers_.try_emplace(hash, stack_numbers_.size() + 1).first->second;
}

size_t HeapRunEncoder::live_blocks() const {
  size_t live = 0;
  for (const auto& [pid, process] : processes_) live += process.blocks.size();
  return live;
}

void HeapRunDecoder::start_frame() {
  // As the writer: sites without live blocks go at a frame's start.
  for (auto& [pid, sites] : processes_)
    absl::erase_if(sites, [](const auto& entry) { return entry.second.empty(); });
  threads_.clear();
  sites_.clear();
  orders_.clear();
  ++generation_;
}

void HeapRunDecoder::observe(const Event& event) {
  switch (event.type) {
    case EventType::Fork:
    case EventType::Exec:
    case EventType::Exit:
      ++generation_;
      process_ = nullptr;  // processes_ changes
      break;
    default: return;
  }
  switch (event.type) {
    case EventType::Fork: {
      auto parent = processes_.find(event.parent_pid);
      Sites inherited = parent == processes_.end() ? Sites{} : parent->second;
      processes_[event.pid] = std::move(inherited);
      break;
    }
    case EventType::Exec: processes_[event.pid].clear(); break;
    case EventType::Exit: processes_.erase(event.pid); break;
    default: break;
  }
}

void HeapRunDecoder::read_tables(const HeapColumns& columns) {
  ColumnReader new_threads(columns.new_threads, "new_threads");
  while (!new_threads.at_end()) {
    uint64_t pid = new_threads.varint(), tid = new_threads.varint();
    if (pid > std::numeric_limits<uint32_t>::max() || tid > std::numeric_limits<uint32_t>::max())
      throw DecodeError("a Heap record's thread id is out of range");
    threads_.push_back({static_cast<int32_t>(pid), static_cast<int32_t>(tid)});
  }
  ColumnReader new_sites(columns.new_sites, "new_sites");
  while (!new_sites.at_end()) {
    uint64_t size = new_sites.varint();
    sites_.emplace_back(size, new_sites.varint());
  }
  orders_.resize(sites_.size());
}

void HeapRunDecoder::expand(const HeapColumns& columns, Event& event,
                            const std::function<void(const Event&)>& on_event, uint64_t& delivered) {
  if (columns.tick_ns == 0 || columns.tick_ns > 1'000'000'000) throw DecodeError("a Heap record's tick_ns is out of range");
  if (columns.first_block == 0 || columns.first_block >= kForeignHighBit)
    throw DecodeError("a Heap record's first_block is out of range");
  read_tables(columns);
  ColumnReader ticks(columns.ticks, "ticks"), threads(columns.threads, "threads"), sites(columns.sites, "sites"),
      refs(columns.refs, "refs"), addresses(columns.addresses, "addresses");
  uint64_t next_block = columns.first_block;
  uint64_t tick = columns.first_tick;
  event = Event{};
  auto site_at = [&]() -> size_t {
    uint64_t index = sites.varint();
    if (index >= sites_.size()) throw DecodeError("a Heap record names a site its frame did not define");
    return index;
  };
  // The order of the frame's site `index` in the current process; null when
  // it has no live block (unless `create`).
  auto order_at = [&](size_t index, bool create) -> SiteOrder* {
    CachedOrder& cached = orders_[index];
    if (cached.generation == generation_) return cached.order;
    SiteOrder* order = nullptr;
    if (create) {
      order = &(*process_)[sites_[index]];
    } else {
      auto it = process_->find(sites_[index]);
      if (it == process_->end()) return nullptr;
      order = &it->second;
    }
    cached = {order, generation_};
    return order;
  };
  // A live block named by site and rank (or number): its number, 0 when it
  // is not known (a frame before was lost). Forgotten when `released`.
  auto named_block = [&](bool released) -> uint64_t {
    SiteOrder* order = order_at(site_at(), false);
    const uint64_t ref = refs.varint();
    if (ref & 1) {
      uint64_t back = ref >> 1;
      if (back == 0 || back >= next_block) throw DecodeError("a Heap record names a block before the first");
      uint64_t number = next_block - back;
      if (released && order) order->remove(number);
      return number;
    }
    if (!order) return 0;
    return released ? order->take_rank(ref >> 1) : order->number_of_rank(ref >> 1);
  };
  auto old_block = [&](uint8_t kind, bool released) -> uint64_t {
    if (kind & heap_kind::kNoOldBlock) return 0;
    if (kind & heap_kind::kForeignOldBlock) {
      uint64_t address = addresses.le64();
      return address & kBlockKeyBit ? address | kForeignHighBit : address;
    }
    // Number 0 is never a block's: its free is read as unmatched.
    return kBlockKeyBit | named_block(released);
  };
  for (uint8_t kind : columns.kinds) {
    const auto type = static_cast<EventType>(kind & heap_kind::kTypeMask);
    if (!is_heap_event(type)) throw DecodeError("a Heap record holds an event of type " + std::to_string(kind & 7));
    tick += static_cast<uint64_t>(unzigzag(ticks.varint()));
    uint64_t thread = threads.varint();
    if (thread >= threads_.size()) throw DecodeError("a Heap record names a thread its frame did not define");
    // Every field a heap event has (the others stay as reset above).
    event.type = type;
    event.pid = threads_[thread].pid;
    event.tid = threads_[thread].tid;
    event.timestamp = tick * columns.tick_ns;
    event.addr = event.size = event.old_addr = event.stack_hash = 0;
    if (!process_ || process_pid_ != event.pid) {
      process_ = &processes_[event.pid];  // may move the others: only this one is held
      process_pid_ = event.pid;
      ++generation_;  // the cached orders were another process's
    }
    if (type == EventType::Free) {
      event.addr = old_block(kind, true);
    } else {
      const size_t site = site_at();
      event.size = sites_[site].first;
      event.stack_hash = sites_[site].second;
      const bool failed = kind & heap_kind::kFailed;
      if (type == EventType::Realloc) event.old_addr = old_block(kind, !failed || event.size == 0);
      if (failed) {
        event.addr = 0;
      } else if (kind & heap_kind::kReusedBlock) {
        uint64_t number = named_block(true);
        if (number != 0) order_at(site, true)->add(number);
        event.addr = kBlockKeyBit | number;
      } else {
        if (next_block >= kForeignHighBit) throw DecodeError("a Heap record numbers too many blocks");
        order_at(site, true)->add(next_block);
        event.addr = kBlockKeyBit | next_block++;
      }
    }
    on_event(event);
    ++delivered;
  }
  if (!ticks.at_end() || !threads.at_end() || !sites.at_end() || !refs.at_end() || !addresses.at_end())
    throw DecodeError("a Heap record's columns hold more than its events");
}

}  // namespace memtrack::records
