/* A malloc/free loop for the whole-program overhead benchmarks: prints the
 * median ns per malloc+free pair over several rounds.
 * Usage: malloc_loop [PAIRS] [DEPTH] [cpu]: the loop runs DEPTH frames below
 * main (for the stack capture benchmark); with `cpu`, the time is the
 * thread's CPU time (the probes' kernel time included), which other tasks
 * sharing the CPUs do not inflate as they do wall time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static clockid_t timing_clock = CLOCK_MONOTONIC;

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(timing_clock, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int compare(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double run_loop(long pairs);

/* Recurses `depth` frames, then runs the loop; no tail call, no inlining. */
__attribute__((noinline)) static double descend(int depth, long pairs) {
  double result = depth > 0 ? descend(depth - 1, pairs) : run_loop(pairs);
  __asm__ volatile("" ::: "memory");
  return result;
}

int main(int argc, char** argv) {
  long pairs = argc > 1 ? atol(argv[1]) : 200000;
  int depth = argc > 2 ? atoi(argv[2]) : 0;
  if (argc > 3 && strcmp(argv[3], "cpu") == 0) timing_clock = CLOCK_THREAD_CPUTIME_ID;
  printf("%.1f\n", descend(depth, pairs));
  return 0;
}

static double run_loop(long pairs) {
  enum { kRounds = 5 };
  double per_pair[kRounds];
  for (int r = 0; r < kRounds; ++r) {
    double start = now_ns();
    for (long i = 0; i < pairs; ++i) {
      void* p = malloc(64);
      /* Keep the compiler from eliding the pair. */
      __asm__ volatile("" : : "r"(p) : "memory");
      free(p);
    }
    per_pair[r] = (now_ns() - start) / pairs;
  }
  qsort(per_pair, kRounds, sizeof(double), compare);
  return per_pair[kRounds / 2];
}
