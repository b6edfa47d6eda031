#include "realistic_trace.h"

#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <unordered_map>

namespace memtrack::bench {

namespace {

constexpr int32_t kPid = 31337;
constexpr int kThreads = 4;
constexpr std::array<uint64_t, 8> kSmallSizes = {16, 24, 32, 48, 64, 96, 128, 512};
// Smaller classes are the commoner ones in real programs.
constexpr std::array<double, 8> kSmallWeights = {20, 15, 20, 10, 15, 5, 10, 5};
constexpr uint64_t kPage = 4096;

// Hands out addresses like a malloc: a bump pointer per region, and
// last-freed-first-reused slots per size class (small) or page count (large).
class SimulatedHeap {
 public:
  uint64_t allocate(uint64_t size) {
    uint64_t slot = slot_size(size);
    std::vector<uint64_t>& free_slots = free_slots_[slot];
    if (!free_slots.empty()) {
      uint64_t addr = free_slots.back();
      free_slots.pop_back();
      return addr;
    }
    uint64_t& bump = slot >= kPage ? large_bump_ : small_bump_;
    uint64_t addr = bump;
    bump += slot;
    return addr;
  }
  void release(uint64_t addr, uint64_t size) { free_slots_[slot_size(size)].push_back(addr); }
  // Whether a block of `old_size` can grow or shrink to `new_size` in place.
  static bool same_slot(uint64_t old_size, uint64_t new_size) {
    return slot_size(old_size) == slot_size(new_size);
  }

 private:
  static uint64_t slot_size(uint64_t size) {
    if (size >= kPage) return (size + kPage - 1) / kPage * kPage;
    return (size + 16 + 15) / 16 * 16;  // a 16-byte chunk header, 16-byte aligned
  }

  uint64_t small_bump_ = 0x5555'5576'0000;  // brk heap
  uint64_t large_bump_ = 0x7f3a'1200'0000;  // mmap area
  std::unordered_map<uint64_t, std::vector<uint64_t>> free_slots_;
};

struct LiveBlock {
  uint64_t addr;
  uint64_t size;
};

}  // namespace

std::vector<Event> realistic_trace(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::discrete_distribution<size_t> small_class(kSmallWeights.begin(), kSmallWeights.end());
  std::uniform_int_distribution<uint64_t> step_ns(50, 2000);
  std::uniform_int_distribution<int> other_thread(1, kThreads - 1);

  auto draw_size = [&]() -> uint64_t {
    if (unit(rng) < 0.95) return kSmallSizes[small_class(rng)];
    return static_cast<uint64_t>(std::exp2(12.0 + 8.0 * unit(rng)));  // log-uniform 4 KiB-1 MiB
  };
  // Most frees are of recently allocated blocks; the rest of any live one.
  std::vector<LiveBlock> live;
  auto pick_live = [&]() -> size_t {
    size_t recent = std::min<size_t>(live.size(), 32);
    if (unit(rng) < 0.7) return live.size() - 1 - static_cast<size_t>(rng() % recent);
    return static_cast<size_t>(rng() % live.size());
  };
  auto remove_live = [&](size_t index) {
    live[index] = live.back();
    live.pop_back();
  };

  SimulatedHeap heap;
  std::vector<Event> events;
  events.reserve(count);
  uint64_t timestamp = 5'000'000'000'000;
  int thread = 0;
  while (events.size() < count) {
    timestamp += step_ns(rng);
    if (unit(rng) < 0.125)
      thread = (thread + other_thread(rng)) % kThreads;  // threads run in bursts
    Event event;
    event.pid = kPid;
    event.tid = kPid + thread;
    event.timestamp = timestamp;
    double action = unit(rng);
    if (action < 0.48 || live.empty()) {
      event.type = rng() % 20 == 0 ? EventType::Calloc : EventType::Malloc;
      event.size = draw_size();
      event.addr = heap.allocate(event.size);
      live.push_back({event.addr, event.size});
    } else if (action < 0.90) {
      size_t index = pick_live();
      event.type = EventType::Free;
      event.addr = live[index].addr;
      heap.release(live[index].addr, live[index].size);
      remove_live(index);
    } else {
      size_t index = pick_live();
      LiveBlock block = live[index];
      event.type = EventType::Realloc;
      event.old_addr = block.addr;
      event.size = unit(rng) < 0.75 ? std::min<uint64_t>(block.size * 2, uint64_t{1} << 20)
                                    : std::max<uint64_t>(block.size / 2, 8);
      if (SimulatedHeap::same_slot(block.size, event.size)) {
        event.addr = block.addr;
      } else {
        event.addr = heap.allocate(event.size);
        heap.release(block.addr, block.size);
      }
      remove_live(index);
      live.push_back({event.addr, event.size});
    }
    events.push_back(event);
  }
  return events;
}

std::vector<Event> stack_trace(size_t stacks, uint64_t seed) {
  constexpr size_t kStackBytes = 2048;
  constexpr size_t kRegisters = 17;
  constexpr size_t kFrames = 16;
  std::mt19937_64 rng(seed);
  std::discrete_distribution<size_t> small_class(kSmallWeights.begin(), kSmallWeights.end());
  std::uniform_int_distribution<uint64_t> step_ns(50, 2000);
  std::vector<Event> events;
  events.reserve(2 * stacks);
  uint64_t timestamp = 5'000'000'000'000;
  uint64_t next_block = 0x5555'5576'0000;
  for (size_t i = 0; i < stacks; ++i) {
    auto definition = std::make_shared<StackDefinition>();
    definition->hash = rng() | 1;  // never 0
    uint64_t pc = 0x5555'5555'0000 + rng() % 0x10'0000;
    for (size_t frame = 0; frame < kFrames; ++frame) definition->chain.push_back(pc + frame * 0x140);
    definition->end = StackEnd::NoRule;
    definition->miss_pc = 0x7f3a'0000'0000 + rng() % 0x20'0000;
    definition->sp = 0x7ffd'0000'0000 + (rng() % 0x1000) * 16;
    for (size_t r = 0; r < kRegisters; ++r) definition->regs.push_back(rng());
    definition->bytes.resize(kStackBytes);
    for (size_t b = 0; b < kStackBytes; b += 8) {
      uint64_t word = rng();
      std::memcpy(definition->bytes.data() + b, &word, sizeof word);
    }
    Event stack;
    stack.type = EventType::Stack;
    stack.pid = kPid;
    stack.tid = kPid + static_cast<int32_t>(rng() % kThreads);
    stack.timestamp = timestamp += step_ns(rng);
    stack.stack = definition;
    Event allocation;
    allocation.type = EventType::Malloc;
    allocation.pid = kPid;
    allocation.tid = stack.tid;
    allocation.timestamp = timestamp += step_ns(rng);
    allocation.size = kSmallSizes[small_class(rng)];
    allocation.addr = next_block;
    allocation.stack_hash = definition->hash;
    next_block += (allocation.size + 16 + 15) / 16 * 16;
    events.push_back(std::move(stack));
    events.push_back(std::move(allocation));
  }
  return events;
}

uint64_t raw_stack_bytes(const std::vector<Event>& events) {
  uint64_t bytes = 0;
  for (const Event& event : events) {
    if (event.type == EventType::Stack && event.stack) bytes += event.stack->bytes.size();
  }
  return bytes;
}

}  // namespace memtrack::bench
