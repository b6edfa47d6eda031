// The heap replay's table of live blocks against a plain map, on random
// sequences of insertions, lookups and removals of block numbers (mostly
// recent, some old enough to have left the front) and of addresses (a small
// pool, so that slots collide and keys come back while live).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "analyze/live_block_table.h"
#include "format/artifact.h"

namespace memtrack {
namespace {

using Table = LiveBlockTable<uint64_t>;
constexpr uint64_t kFront = uint64_t{1} << Table::kMaxFrontBits;

std::map<uint64_t, uint64_t> contents(const Table& table) {
  std::map<uint64_t, uint64_t> out;
  table.for_each([&](uint64_t key, uint64_t value) { EXPECT_TRUE(out.emplace(key, value).second) << key; });
  return out;
}

void run(uint64_t seed, bool addresses) {
  std::mt19937_64 random(seed);
  Table table;
  std::map<uint64_t, uint64_t> expected;
  uint64_t next_block = 1;
  auto pick_key = [&]() -> uint64_t {
    if (addresses) return 0x10000 + (random() % (3 * kFront)) * 16;
    // A recent block, one beyond the front's reach, or a new one.
    const uint64_t numbered = next_block - 1;
    switch (numbered == 0 ? 0 : random() % 4) {
      case 1: return kBlockKeyBit | (next_block - 1 - random() % std::min<uint64_t>(numbered, 64));
      case 2: return kBlockKeyBit | (1 + random() % numbered);
      default: return kBlockKeyBit | next_block++;
    }
  };
  for (int step = 0; step < 200'000; ++step) {
    const uint64_t key = pick_key();
    const uint64_t value = random();
    auto it = expected.find(key);
    if (random() % 2 == 0) {
      auto [block, added] = table.try_emplace(key, value);
      ASSERT_EQ(added, it == expected.end()) << "seed " << seed << " step " << step;
      if (added) expected.emplace(key, value);
      ASSERT_EQ(*block, expected.at(key));
    } else {
      uint64_t* block = table.find(key);
      ASSERT_EQ(block != nullptr, it != expected.end()) << "seed " << seed << " step " << step;
      if (block) {
        ASSERT_EQ(*block, it->second);
        table.erase(key);
        expected.erase(it);
      }
    }
    ASSERT_EQ(table.size(), expected.size());
  }
  EXPECT_EQ(contents(table), expected) << "seed " << seed;
  Table copy = table;  // a fork's copy
  EXPECT_EQ(contents(copy), expected) << "seed " << seed;
  table.clear();
  EXPECT_EQ(table.size(), 0u);
  EXPECT_TRUE(contents(table).empty());
  EXPECT_EQ(contents(copy), expected) << "seed " << seed;
}

TEST(LiveBlockTable, BlockNumbersBehaveAsAMap) {
  for (uint64_t seed = 1; seed <= 5; ++seed) run(seed, false);
}

TEST(LiveBlockTable, AddressesBehaveAsAMap) {
  for (uint64_t seed = 1; seed <= 5; ++seed) run(seed, true);
}

TEST(LiveBlockTable, AnOldBlockEvictedFromTheFrontIsStillFound) {
  Table table;
  table.try_emplace(kBlockKeyBit | 1, 11);
  for (uint64_t n = 2; n <= 3 * kFront; ++n) table.try_emplace(kBlockKeyBit | n, n);
  ASSERT_NE(table.find(kBlockKeyBit | 1), nullptr);
  EXPECT_EQ(*table.find(kBlockKeyBit | 1), 11u);
  // Inserting it again finds it, not a second copy.
  EXPECT_FALSE(table.try_emplace(kBlockKeyBit | 1, 99).second);
  EXPECT_EQ(table.size(), 3 * kFront);
}

}  // namespace
}  // namespace memtrack
