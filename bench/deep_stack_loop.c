/* A malloc/free loop at the bottom of a deep recursion with frames of a
 * chosen size, for the cost of walking call paths past the stack copy
 * (bench/stacks_deep.sh); and the cost of the getppid() syscall, the
 * machine's kernel-entry floor quoted next to the figures. Times are the
 * thread's CPU time (probe handlers run in the thread and count there), so
 * that other load on the machine does not inflate them, and the fastest of
 * 5 rounds: on a VM, time the hypervisor steals still counts as CPU time.
 * Usage: deep_stack_loop PAIRS DEPTH FRAME_BYTES: prints the fastest ns per
 *        malloc+free pair of 5 rounds (thread CPU time), DEPTH frames of FRAME_BYTES below main.
 *        deep_stack_loop getppid CALLS: prints the fastest ns per getppid(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { kRounds = 5 };

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int compare(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double fastest(double* values) {
  qsort(values, kRounds, sizeof(double), compare);
  return values[0];
}

static double run_loop(long pairs) {
  double per_pair[kRounds];
  for (int r = 0; r < kRounds; ++r) {
    double start = now_ns();
    for (long i = 0; i < pairs; ++i) {
      void* p = malloc(64);
      __asm__ volatile("" : : "r"(p) : "memory"); /* keep the pair */
      free(p);
    }
    per_pair[r] = (now_ns() - start) / pairs;
  }
  return fastest(per_pair);
}

static size_t g_frame_bytes;

/* A frame of g_frame_bytes locals per level; no tail call, no inlining. */
__attribute__((noinline)) static double descend(int depth, long pairs) {
  volatile char pad[g_frame_bytes];
  pad[0] = (char)depth;
  double result = depth > 0 ? descend(depth - 1, pairs) : run_loop(pairs);
  __asm__ volatile("" : : "r"(pad) : "memory");
  return result;
}

static double getppid_cost(long calls) {
  double per_call[kRounds];
  for (int r = 0; r < kRounds; ++r) {
    double start = now_ns();
    for (long i = 0; i < calls; ++i) __asm__ volatile("" : : "r"(getppid()) : "memory");
    per_call[r] = (now_ns() - start) / calls;
  }
  return fastest(per_call);
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "getppid") == 0) {
    printf("%.1f\n", getppid_cost(atol(argv[2])));
    return 0;
  }
  if (argc != 4) {
    fprintf(stderr, "usage: deep_stack_loop PAIRS DEPTH FRAME_BYTES | deep_stack_loop getppid CALLS\n");
    return 2;
  }
  long pairs = atol(argv[1]);
  int depth = atoi(argv[2]);
  g_frame_bytes = (size_t)atol(argv[3]);
  if (pairs < 1 || depth < 0 || g_frame_bytes < 1 || g_frame_bytes > 65536) return 2;
  printf("%.1f\n", descend(depth, pairs));
  return 0;
}
