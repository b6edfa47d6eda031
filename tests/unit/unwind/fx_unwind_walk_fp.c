/* Built -O2 -fno-omit-frame-pointer: CFA = rbp + 16 after the prologue. */
#include "fx_unwind.h"

int fx_walk_fp(int depth, struct fx_capture* out, uintptr_t stack_end) {
  volatile char pad[64];
  pad[depth & 63] = (char)depth;
  int r = depth > 0 ? fx_walk_nofp(depth - 1, out, stack_end) : fx_capture_stack(out, stack_end);
  return r + pad[depth & 63]; /* the frame is live after the call: no tail call */
}
