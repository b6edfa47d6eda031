/* A page-touching workload for the memory records' cost (bench/memory.sh):
 * maps MIB MiB, writes one byte per 4 KiB page (each a page fault, each an
 * RSS counter change), unmaps; ROUNDS times. Prints the median ns per page,
 * in CPU time (the kernel's time in the fault and its tracepoint included).
 * Usage: touch_pages [MIB] [ROUNDS] */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static double cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int compare(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  long mib = argc > 1 ? atol(argv[1]) : 256, rounds = argc > 2 ? atol(argv[2]) : 5;
  if (mib <= 0 || rounds <= 0 || rounds > 100) return 2;
  size_t bytes = (size_t)mib << 20, pages = bytes / 4096;
  double per_page[100];
  for (long r = 0; r < rounds; ++r) {
    char* area = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) return 1;
    double start = cpu_ns();
    for (size_t p = 0; p < pages; ++p) ((volatile char*)area)[p * 4096] = 1;
    per_page[r] = (cpu_ns() - start) / (double)pages;
    munmap(area, bytes);
  }
  qsort(per_page, (size_t)rounds, sizeof(double), compare);
  printf("%.1f\n", per_page[rounds / 2]);
  return 0;
}
