// The live blocks of one address space, keyed by address (the records
// layout) or by block number (the compact layout: kBlockKeyBit | n).
//
// The heap replay looks a block up at every allocation and free: the report's
// hottest path. Most blocks die young, so a direct-mapped front of recent
// keys serves nearly every lookup without hashing, and an open-addressing
// map holds the rest:
//
//   key ──> front[slot(key)] ── holds key? ──> the block
//                 │ no
//                 └──> overflow (absl::flat_hash_map) ──> the block, or absent
//
// Rules:
// - A key lives in exactly one place: its front slot or the overflow.
// - An insertion takes the key's front slot; the block there before moves to
//   the overflow (it stays live, only slower to reach).
// - A block number's slot is its low bits, so consecutive blocks take
//   neighbouring slots and a block is evicted only after as many younger
//   ones as the front has slots were numbered. An address's slot is a
//   multiplicative hash: addresses do not come in order, so a slot's last
//   key is a random live block and the front helps little (the compact
//   writer's table of addresses, tried with it, did not get faster).
// - The front starts at 2^kFirstFrontBits slots and doubles, up to
//   2^kMaxFrontBits, whenever the live blocks outnumber its slots: a process
//   that allocates little costs a few KiB (a build runs thousands).
// - Key 0 is never a block's (the replay stores no failed allocation; block
//   numbers carry the top bit): it marks an empty slot.
// - A key greater than every key inserted so far cannot be present: the
//   compact layout's new blocks are inserted without a lookup.
// - Pointers to blocks stay valid until the next insertion or clear().
// - Iteration order is unspecified (front first, then the overflow).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/hash/hash.h>

#include "format/artifact.h"

namespace memtrack {

template <typename Block>
class LiveBlockTable {
 public:
  static constexpr int kFirstFrontBits = 8;
  static constexpr int kMaxFrontBits = 14;  // 16 Ki slots: 512 KiB of the replay's 24-byte blocks

  Block* find(uint64_t key) {
    if (!front_.empty()) {
      Slot& slot = front_[slot_of(key)];
      if (slot.key == key) return &slot.block;
    }
    if (overflow_.empty()) return nullptr;
    auto it = overflow_.find(key);
    return it == overflow_.end() ? nullptr : &it->second;
  }

  // The block at `key`, added as `block` when absent (second: added).
  std::pair<Block*, bool> try_emplace(uint64_t key, const Block& block) {
    if (front_.empty()) {
      front_.resize(size_t{1} << kFirstFrontBits);
      front_bits_ = kFirstFrontBits;
    } else if (size_ >= front_.size() && front_bits_ < kMaxFrontBits) {
      grow_front();
    }
    Slot& slot = front_[slot_of(key)];
    if (slot.key == key) return {&slot.block, false};
    if (key <= max_key_ && !overflow_.empty()) {
      auto it = overflow_.find(key);
      if (it != overflow_.end()) return {&it->second, false};
    }
    if (key > max_key_) max_key_ = key;
    if (slot.key != 0) overflow_.emplace(slot.key, slot.block);
    slot.key = key;
    slot.block = block;
    ++size_;
    return {&slot.block, true};
  }

  // Removes `key` (known present: find() returned it).
  void erase(uint64_t key) {
    --size_;
    if (!front_.empty()) {
      Slot& slot = front_[slot_of(key)];
      if (slot.key == key) {
        slot.key = 0;
        return;
      }
    }
    overflow_.erase(key);
  }

  size_t size() const { return size_; }

  // f(key, block) for every live block.
  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& slot : front_)
      if (slot.key != 0) f(slot.key, slot.block);
    for (const auto& [key, block] : overflow_) f(key, block);
  }
  template <typename F>
  void for_each(F&& f) {
    for (Slot& slot : front_)
      if (slot.key != 0) f(slot.key, slot.block);
    for (auto& [key, block] : overflow_) f(key, block);
  }

  // Empty, its memory released.
  void clear() {
    std::vector<Slot>().swap(front_);
    front_bits_ = 0;
    Overflow().swap(overflow_);
    size_ = 0;
    max_key_ = 0;
  }

 private:
  struct Slot {
    uint64_t key = 0;
    Block block{};
  };
  // The compact layout's blocks are numbered in allocation order and a free
  // mostly names a recent one: consecutive numbers get neighbouring slots
  // (absl places a key by its hash above the low 7 bits), so that lookups of
  // blocks evicted recently stay in cache. Addresses get absl's hash.
  struct OverflowHash {
    size_t operator()(uint64_t key) const {
      uint64_t mixed = absl::Hash<uint64_t>{}(key);
      return (key & kBlockKeyBit) ? (key << 7) | (mixed & 0x7f) : mixed;
    }
  };
  using Overflow = absl::flat_hash_map<uint64_t, Block, OverflowHash>;

  size_t slot_of(uint64_t key) const {
    if (key & kBlockKeyBit) return key & (front_.size() - 1);
    return (key * 0x9E3779B97F4A7C15ull) >> (64 - front_bits_);  // Fibonacci hashing of an address
  }

  // Twice the slots: each key of the front goes to its new slot. Both slot
  // functions take one more bit of the same number (the low bits of a block
  // number, the high bits of an address's product), so keys in distinct
  // slots stay in distinct slots.
  void grow_front() {
    std::vector<Slot> old(size_t{1} << (front_bits_ + 1));
    old.swap(front_);
    ++front_bits_;
    for (const Slot& entry : old)
      if (entry.key != 0) front_[slot_of(entry.key)] = entry;
  }

  std::vector<Slot> front_;  // allocated at the first insertion
  int front_bits_ = 0;
  Overflow overflow_;
  size_t size_ = 0;
  uint64_t max_key_ = 0;
};

}  // namespace memtrack
