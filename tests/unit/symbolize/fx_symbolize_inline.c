// Two levels of always_inline helpers: the call in inline_inner has three
// source frames (inline_inner, inline_middle, fx_inline_outer).
#include "fx_symbolize.h"

static inline __attribute__((always_inline)) int inline_inner(int x) {
  fx_capture(FX_SLOT_INLINE); /* @line:inline_inner */
  return x * 3;
}

static inline __attribute__((always_inline)) int inline_middle(int x) {
  int y = inline_inner(x + 1); /* @line:inline_middle */
  return y ^ 5;
}

__attribute__((noinline)) int fx_inline_outer(int x) {
  int z = inline_middle(x * 7); /* @line:inline_outer */
  return z + 11;
}
