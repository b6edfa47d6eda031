/* The ELF seed of the symbolizer and CFI fuzzers: a few functions with
   inline levels, CFI and DWARF lines, small enough to commit. */
static inline int square(int x) { return x * x; }

__attribute__((noinline)) int leaf(int x) { return square(x) + 1; }

__attribute__((noinline)) int caller(int x) {
  volatile int frame[4] = {x, x, x, x};
  return leaf(frame[1]) + leaf(frame[2]);
}

int entry(int x) { return caller(x) * 2; }
