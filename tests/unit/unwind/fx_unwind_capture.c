#include <execinfo.h>
#include <string.h>

#include "fx_unwind.h"

int fx_capture_stack(struct fx_capture* out, uintptr_t stack_end) {
  uint64_t pc, rsp, rbp;
  /* One statement, so the three values describe the same instruction
   * boundary: pc is the address of the mov right after the lea. */
  __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(pc), "=r"(rsp), "=r"(rbp));
  out->pc = pc;
  out->rsp = rsp;
  out->rbp = rbp;
  out->size = stack_end - rsp < sizeof out->stack ? stack_end - rsp : sizeof out->stack;
  /* The slots the walk reads (return addresses, saved rbp) are written by
   * prologues, above rsp, and stay put while the frames live. */
  memcpy(out->stack, (const void*)rsp, out->size);
  out->frames = backtrace(out->backtrace, (int)(sizeof out->backtrace / sizeof out->backtrace[0]));
  return out->frames;
}
