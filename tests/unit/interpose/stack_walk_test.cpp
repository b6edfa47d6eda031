// The interposer's stack walker (src/interpose/stack_walk.c) in this process,
// with the tables the recorder shares: its call paths are the return
// addresses libgcc's unwinder finds (backtrace), on the first walk through
// a frame, on walks that find its rule in the thread's frame cache and on
// walks that take a kept walk's frames, and a rule cached under one module
// table is not used under the next.
#include <execinfo.h>
#include <gtest/gtest.h>

#include <map>

#include "interposer_walk.h"

namespace memtrack {
namespace {

// An allocator wrapper's stand-in: captures its caller's path, and the path
// libgcc's unwinder gives from the same frame into `expected`.
__attribute__((noinline)) uint64_t capture_here(std::vector<uint64_t>* expected) {
  auto* frame = static_cast<void* const*>(__builtin_frame_address(0));
  if (expected) {
    void* found[256];
    int count = backtrace(found, 256);
    expected->clear();
    for (int i = 1; i < count; ++i) expected->push_back(reinterpret_cast<uint64_t>(found[i]));
  }
  uint64_t hash = InProcessWalker::instance().capture(frame);
  asm volatile("" ::: "memory");  // not a tail call: this frame stays
  return hash;
}

__attribute__((noinline)) uint64_t capture_below(int depth, std::vector<uint64_t>* expected) {
  uint64_t hash = depth == 0 ? capture_here(expected) : capture_below(depth - 1, expected);
  asm volatile("" ::: "memory");
  return hash;
}

// The one definition a walk wrote.
WalkDefinition only_definition() {
  std::vector<WalkDefinition> found = InProcessWalker::instance().definitions();
  EXPECT_EQ(found.size(), 1u);
  return found.empty() ? WalkDefinition{} : found.front();
}

TEST(InterposerStackWalk, PathsAreLibgccsOnFirstAndCachedWalks) {
  InProcessWalker& walker = InProcessWalker::instance();
  walker.definitions();
  // Depth 3 walks every frame first; depths 5 and 2 then repeat its frames
  // (the rules come from the cache) at other stack addresses.
  for (int depth : {3, 5, 2}) {
    std::vector<uint64_t> expected;
    uint64_t hash = capture_below(depth, &expected);
    WalkDefinition d = only_definition();
    EXPECT_EQ(d.header.hash, hash);
    EXPECT_EQ(d.header.end, MT_END_COMPLETE) << "depth " << depth;
    EXPECT_EQ(d.chain, expected) << "depth " << depth;
  }
  // The same path again (the same call site): defined before, the same hash.
  uint64_t hashes[2];
  size_t defined[2];
  for (int i = 0; i < 2; ++i) {
    hashes[i] = capture_below(4, nullptr);
    defined[i] = walker.definitions().size();
  }
  EXPECT_EQ(hashes[1], hashes[0]);
  EXPECT_EQ(defined[0], 1u);
  EXPECT_EQ(defined[1], 0u);
}

// Calls capture_below(depth) below `above` frames of its own, so that the
// walk's outer frames change while its inner ones stay where they were.
__attribute__((noinline)) uint64_t capture_under(int above, int depth, std::vector<uint64_t>* expected) {
  uint64_t hash = above == 0 ? capture_below(depth, expected) : capture_under(above - 1, depth, expected);
  asm volatile("" ::: "memory");
  return hash;
}

// A return address rewritten in place: the same frames at the same
// addresses, one caller different, as when a frame returned and another
// call took its place.
__attribute__((noinline)) uint64_t capture_via(bool other, std::vector<uint64_t>* expected) {
  uint64_t hash;
  // Different code after each call: the two calls stay two call sites.
  if (other) {
    hash = capture_below(3, expected);
    asm volatile("nop" ::: "memory");
  } else {
    hash = capture_below(3, expected);
    asm volatile("nop; nop" ::: "memory");
  }
  return hash;
}

uint64_t counter(const char* name) { return InProcessWalker::instance().counters().at(name); }

TEST(InterposerStackWalk, AWalkTakesTheKeptWalkOnlyWhereEveryWordItReadIsTheSame) {
  InProcessWalker& walker = InProcessWalker::instance();
  walker.definitions();
  // The same path again (one call site, in a loop): the kept walk whole, the
  // same hash and no definition.
  uint64_t hashes[2], repeated_before = 0;
  for (int i = 0; i < 2; ++i) {
    std::vector<uint64_t> expected;
    hashes[i] = capture_below(5, &expected);
    if (i == 0) {
      ASSERT_EQ(only_definition().chain, expected);
      repeated_before = counter("interposer_walks_repeated");
    }
  }
  EXPECT_EQ(hashes[1], hashes[0]);
  EXPECT_EQ(counter("interposer_walks_repeated"), repeated_before + 1);
  EXPECT_TRUE(walker.definitions().empty());
  // Other outer frames around the same site: not the kept path; each walk
  // is libgcc's.
  for (int above : {2, 1, 3}) {
    std::vector<uint64_t> found;
    uint64_t hash = capture_under(above, 5 - above, &found);
    std::vector<WalkDefinition> defined = walker.definitions();
    ASSERT_EQ(defined.size(), 1u) << "above " << above;
    EXPECT_EQ(defined[0].header.hash, hash);
    EXPECT_EQ(defined[0].header.end, MT_END_COMPLETE);
    EXPECT_EQ(defined[0].chain, found) << "above " << above;
  }
  // One return address differs (capture_via's two call sites), every
  // frame's address the same: each walk in turn finds the kept walk's
  // frames in the same state but one word different, and is its own path,
  // the one it was the first time.
  std::map<bool, uint64_t> hash_of;
  std::map<bool, std::vector<uint64_t>> path_of;
  for (int i = 0; i < 6; ++i) {
    bool other = i % 2 == 1;
    std::vector<uint64_t> found;
    uint64_t hash = capture_via(other, &found);
    std::vector<WalkDefinition> defined = walker.definitions();
    if (i < 2) {
      ASSERT_EQ(defined.size(), 1u);
      EXPECT_EQ(defined[0].chain, found);
      hash_of[other] = hash;
      path_of[other] = found;
    } else {
      EXPECT_TRUE(defined.empty()) << "walk " << i;
      EXPECT_EQ(hash, hash_of[other]) << "walk " << i;
      EXPECT_EQ(found, path_of[other]) << "walk " << i;
    }
  }
  ASSERT_NE(path_of[false], path_of[true]);
  // Joining: a deeper inner part under the kept walk's outer frames (the
  // test's callers, where capture_via's were).
  uint64_t joined_before = counter("interposer_walks_joined");
  std::vector<uint64_t> expected;
  capture_under(0, 9, &expected);
  EXPECT_EQ(only_definition().chain, expected);
  EXPECT_EQ(counter("interposer_walks_joined"), joined_before + 1);
}

TEST(InterposerStackWalk, RulesFoundUnderOneModuleTableAreNotUsedUnderTheNext) {
  InProcessWalker& walker = InProcessWalker::instance();
  walker.definitions();
  std::vector<uint64_t> expected;
  capture_below(6, &expected);  // every rule of the path is cached
  ASSERT_EQ(only_definition().chain, expected);
  // The recorder rewrites the table: this code's module is no longer in it.
  const mt_module_table original = walker.modules();
  mt_module_table without{};
  auto here = reinterpret_cast<uint64_t>(&capture_here);
  for (uint32_t i = 0; i < original.count; ++i)
    if (here < original.modules[i].start || here >= original.modules[i].end)
      without.modules[without.count++] = original.modules[i];
  ASSERT_LT(without.count, original.count);
  walker.set_modules(without);
  capture_below(6, nullptr);
  WalkDefinition stopped = only_definition();
  EXPECT_EQ(stopped.header.end, MT_END_NO_MODULE);
  EXPECT_EQ(stopped.chain.size(), 1u);
  // The table back: the walk completes again, as before.
  walker.set_modules(original);
  uint64_t again = capture_below(7, &expected);
  WalkDefinition d = only_definition();
  EXPECT_EQ(d.header.hash, again);
  EXPECT_EQ(d.chain, expected);
}

}  // namespace
}  // namespace memtrack
