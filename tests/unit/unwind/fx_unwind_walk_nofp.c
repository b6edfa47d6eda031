/* Built -O2 -fomit-frame-pointer: CFA = rsp + the frame size. */
#include "fx_unwind.h"

int fx_walk_nofp(int depth, struct fx_capture* out, uintptr_t stack_end) {
  volatile char pad[200];
  pad[depth % 200] = (char)depth;
  int r = depth > 0 ? fx_walk_fp(depth - 1, out, stack_end) : fx_capture_stack(out, stack_end);
  return r + pad[depth % 200]; /* the frame is live after the call: no tail call */
}

/* noinline: gcc would inline a few levels of the recursion into each frame. */
__attribute__((noinline)) int fx_recurse_nofp(int depth, struct fx_capture* out, uintptr_t stack_end) {
  volatile char pad[48];
  pad[depth % 48] = (char)depth;
  int r = depth > 0 ? fx_recurse_nofp(depth - 1, out, stack_end) : fx_capture_stack(out, stack_end);
  return r + pad[depth % 48];
}
