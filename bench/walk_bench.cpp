// The interposer's stack walk (record --fast-path --stacks) per allocation:
// mt_stack_capture from below a recursion of DEPTH frames of this process,
// with the tables the recorder shares (tests/support/interposer_walk.h). The
// path was defined before (the steady state: a program repeats its paths), so
// this is the walk, the hash and the per-process set of defined paths (the
// first walk defines the path).
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

void walk(benchmark::State& state) {
  auto& walker = memtrack::InProcessWalker::instance();
  int depth = static_cast<int>(state.range(0));
  walker.definitions();
  for (auto _ : state) benchmark::DoNotOptimize(capture_below(depth));
  // Defined by the first walk of the first run only (each run repeats it).
  if (walker.definitions().size() > 1) state.SkipWithError("the path was defined again");
  if (walker.counters().at("interposer_walks_complete") == 0) state.SkipWithError("no walk completed");
}
BENCHMARK(walk)->Arg(8)->Arg(32)->Arg(128);

}  // namespace
