// The interposer's stack walk (record --fast-path --stacks) per allocation:
// mt_stack_capture from below a recursion of DEPTH frames of this process,
// with the tables the recorder shares (tests/support/interposer_walk.h). The
// path was defined before (the steady state: a program repeats its paths), so
// this is the walk, the hash and the per-process set of defined paths (the
// first walk defines the path): the same path every time (`walk`), or two
// paths in turn (`walk_two_paths`); per walk: items_per_second.
#include <benchmark/benchmark.h>

#include "interposer_walk.h"

namespace {

__attribute__((noinline)) uint64_t capture_here() {
  uint64_t hash = memtrack::InProcessWalker::instance().capture(static_cast<void* const*>(__builtin_frame_address(0)));
  asm volatile("" ::: "memory");  // not a tail call: this frame stays
  return hash;
}

__attribute__((noinline)) uint64_t capture_below(int depth) {
  uint64_t hash = depth == 0 ? capture_here() : capture_below(depth - 1);
  asm volatile("" ::: "memory");
  return hash;
}

// Walks from the bottom of a recursion of `depth` frames, `count` times in a
// loop there: each walk repeats the path of the one before from its call
// site (the compiler may unroll the loop: a few call sites, each its own).
__attribute__((noinline)) uint64_t capture_many_below(int depth, int count) {
  uint64_t hash = 0;
  if (depth == 0)
    for (int i = 0; i < count; ++i) hash ^= capture_here();
  else
    hash = capture_many_below(depth - 1, count);
  asm volatile("" ::: "memory");
  return hash;
}

// The same path every time: the thread's kept walk from the site, checked
// word by word. Per walk: items_per_second.
void walk(benchmark::State& state) {
  constexpr int kWalks = 64;
  auto& walker = memtrack::InProcessWalker::instance();
  int depth = static_cast<int>(state.range(0));
  walker.definitions();
  uint64_t repeated = walker.counters().at("interposer_walks_repeated");
  for (auto _ : state) benchmark::DoNotOptimize(capture_many_below(depth, kWalks));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kWalks);
  if (walker.definitions().size() > 4) state.SkipWithError("the path was defined again");
  if (walker.counters().at("interposer_walks_repeated") - repeated < uint64_t(state.iterations()) * (kWalks - 4))
    state.SkipWithError("the walks were not repeated");
}
BENCHMARK(walk)->Arg(8)->Arg(32)->Arg(128);

// Two paths in turn from the same site, one return address apart (two call
// sites of the recursion): each walk finds the kept walk's frames in the
// same state up to that address, walks itself from the start with the frame
// cache's rules, and joins the kept walk above it.
void walk_two_paths(benchmark::State& state) {
  auto& walker = memtrack::InProcessWalker::instance();
  int depth = static_cast<int>(state.range(0));
  walker.definitions();
  for (auto _ : state) {
    benchmark::DoNotOptimize(capture_below(depth));
    asm volatile("nop" ::: "memory");  // two call sites
    benchmark::DoNotOptimize(capture_below(depth));
    asm volatile("nop; nop" ::: "memory");
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * 2);
  if (walker.definitions().size() > 2) state.SkipWithError("a path was defined again");
}
BENCHMARK(walk_two_paths)->Arg(8)->Arg(32)->Arg(128);

}  // namespace
