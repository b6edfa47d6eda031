/* The functions of libfx_unwind.so (fx_unwind_cfi.S, fx_unwind_debug_frame.S,
 * fx_unwind_walk_*.c, fx_unwind_capture.c) and libfx_unwind_nocfi.so. */
#ifndef MEMTRACK_FX_UNWIND_H
#define MEMTRACK_FX_UNWIND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Hand-written CFI (fx_unwind_cfi.S); the tests only read their code. */
void fx_cfi_leaf(void);
void fx_cfi_frame(void);
void fx_cfi_pushes(void);
void fx_cfi_noreturn(void);
void fx_cfi_after_noreturn(void);
void fx_cfi_outermost(void);
void fx_cfi_breg_expression(void);
void fx_cfi_plt_expression(void);
void fx_cfi_r10_cfa(void);
void fx_cfi_rbp_undefined(void);
void fx_cfi_rbp_in_register(void);
void fx_cfi_rbp_expression(void);
void fx_cfi_ra_elsewhere(void);
void fx_cfi_rsp_saved(void);
void fx_cfi_signal_frame(void);
void fx_cfi_huge_offset(void);
void fx_cfi_none(void);
void fx_cfi_debug_frame_only(void);
void fx_nocfi_function(void);

/* One moment of a thread's stack, seen two ways: the registers and a copy
 * of the stack taken at one instruction of fx_capture_stack, and glibc's
 * backtrace() of the same call chain. */
struct fx_capture {
  uint64_t pc; /* the instruction the registers were read at */
  uint64_t rsp;
  uint64_t rbp;
  size_t size; /* bytes copied from rsp */
  unsigned char stack[64 * 1024];
  int frames;  /* backtrace() entries: [0] is in fx_capture_stack */
  void* backtrace[256];
};

/* Captures into `out` (outside the stack), copying up to `stack_end`. */
int fx_capture_stack(struct fx_capture* out, uintptr_t stack_end);

/* Recursion `depth` calls deep alternating between a frame-pointer frame
 * (fx_walk_fp, -fno-omit-frame-pointer) and an rsp-based one with a 200-byte
 * local array (fx_walk_nofp, -fomit-frame-pointer), then a capture.
 * The return value only keeps the calls from being tail calls. */
int fx_walk_fp(int depth, struct fx_capture* out, uintptr_t stack_end);
int fx_walk_nofp(int depth, struct fx_capture* out, uintptr_t stack_end);

/* `depth` calls of itself (-fomit-frame-pointer), then a capture. */
int fx_recurse_nofp(int depth, struct fx_capture* out, uintptr_t stack_end);

/* Raises SIGUSR1 (its handler installed for the call) and captures inside
 * the handler: the stack crosses a signal frame (glibc's __restore_rt). */
int fx_capture_in_signal_handler(struct fx_capture* out, uintptr_t stack_end);

/* libfx_unwind_nocfi.so: calls fn(out, stack_end) from a frame-pointer frame
 * without any CFI (push rbp; mov rsp, rbp; call). */
typedef int (*fx_capture_fn)(struct fx_capture* out, uintptr_t stack_end);
int fx_nocfi_call(fx_capture_fn fn, struct fx_capture* out, uintptr_t stack_end);

#ifdef __cplusplus
}
#endif

#endif
