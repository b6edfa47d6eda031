// The interposer's stack walker (src/interpose/stack_walk.c) in this process,
// with the tables the recorder shares: its call paths are the return
// addresses libgcc's unwinder finds (backtrace), on the first walk through
// a frame and on walks that find its rule in the thread's frame cache, and a
// rule cached under one module table is not used under the next.
#include <execinfo.h>
#include <gtest/gtest.h>

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
