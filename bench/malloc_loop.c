/* A malloc/free loop for the whole-program overhead benchmark: prints the
 * median ns per malloc+free pair over several rounds. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int compare(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  long pairs = argc > 1 ? atol(argv[1]) : 200000;
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
  printf("%.1f\n", per_pair[kRounds / 2]);
  return 0;
}
