// operator new/delete in a loop, for bench/fast_path.sh's per-call figures of
// the interposer's C++ entry points: prints the median ns per new+delete pair
// over several rounds. Built twice: with libstdc++'s operators (which call
// malloc and free) and with libjemalloc.so's own (the interposer records at
// the operator there). Usage: new_loop [PAIRS] [cpu]; with `cpu` the time is
// the thread's CPU time (the probes' kernel time included).
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <new>

namespace {

clockid_t timing_clock = CLOCK_MONOTONIC;

double now_ns() {
  timespec ts;
  clock_gettime(timing_clock, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

}  // namespace

int main(int argc, char** argv) {
  long pairs = argc > 1 ? std::atol(argv[1]) : 200000;
  if (argc > 2 && std::strcmp(argv[2], "cpu") == 0) timing_clock = CLOCK_THREAD_CPUTIME_ID;
  constexpr int kRounds = 5;
  double per_pair[kRounds];
  for (double& result : per_pair) {
    double start = now_ns();
    for (long i = 0; i < pairs; ++i) {
      void* p = ::operator new(64);
      // Keeps the compiler from eliding the pair.
      __asm__ volatile("" : : "r"(p) : "memory");
      ::operator delete(p);
    }
    result = (now_ns() - start) / pairs;
  }
  std::sort(per_pair, per_pair + kRounds);
  std::printf("%.1f\n", per_pair[kRounds / 2]);
  return 0;
}
