/* The probe cookie: the 64-bit value the recorder attaches with each
 * allocator probe (record/probes/allocator_symbols.cpp, record/probes/probe_attacher.cpp)
 * and the kernel's entry and return programs decode (bpf/alloc.bpf.c); the
 * interposer reads a call's arguments by the same cookies (allocators.h). */
#ifndef MEMTRACK_WIRE_PROBE_COOKIE_H
#define MEMTRACK_WIRE_PROBE_COOKIE_H

#include "types.h"

/* The probe cookie describes an allocator function's arguments, so one pair
 * of BPF programs serves every allocator entry point.
 *   bits 0..7   enum mt_kind of the event to emit
 *   bits 8..11  index of the size argument            (MT_ARG_NONE: none)
 *   bits 12..15 index of the element-count argument   (size is count*size)
 *   bits 16..19 index of the old-pointer argument     (realloc family, free)
 *   bits 20..23 index of the out-pointer argument     (posix_memalign: the
 *               function returns 0 on success and stores the block there) */
#define MT_ARG_NONE 0xfu
#define MT_COOKIE(kind, size_arg, count_arg, ptr_arg, out_arg)                          \
  ((__u64)(kind) | ((__u64)(size_arg) << 8) | ((__u64)(count_arg) << 12) |             \
   ((__u64)(ptr_arg) << 16) | ((__u64)(out_arg) << 20))
/* Bit 24: a glibc entry point the interposer (src/interpose/) takes; in a
 * process whose interposer is ready the probe records nothing. */
#define MT_COOKIE_INTERPOSED (1ull << 24)
/* Bit 25: a free-like entry point of glibc's shared libc. A call to it from
 * libc's own code by `call rel32` to its entry, not through libc's PLT, is
 * the runtime releasing what it holds (glibc 2.36: an exiting thread's
 * tcache, tcache_thread_shutdown; and realloc(p, 0), an inner call anyway):
 * not a free of the program's, and no interposer sees it. The bits above
 * place such a call (alloc.bpf.c, runtime_release):
 *   bits 26..31 the probe's distance from the function's entry, in bytes
 *   bits 32..47 pages of libc's code below the entry's page
 *   bits 48..63 pages of libc's code from the entry's page on */
#define MT_COOKIE_RUNTIME_FREE (1ull << 25)
#define MT_COOKIE_RUNTIME_FREE_OF(probe_delta, pages_below, pages_from)                     \
  (MT_COOKIE_RUNTIME_FREE | ((__u64)(probe_delta) << 26) | ((__u64)(pages_below) << 32) | \
   ((__u64)(pages_from) << 48))
#define MT_RUNTIME_FREE_MAX_DELTA 0x3fu
#define MT_RUNTIME_FREE_MAX_PAGES 0xffffu
#define MT_COOKIE_PROBE_DELTA(c) ((__u64)(((c) >> 26) & MT_RUNTIME_FREE_MAX_DELTA))
#define MT_COOKIE_CODE_PAGES_BELOW(c) ((__u64)(((c) >> 32) & MT_RUNTIME_FREE_MAX_PAGES))
#define MT_COOKIE_CODE_PAGES_FROM(c) ((__u64)((c) >> 48))
#define MT_COOKIE_KIND(c) ((__u32)((c) & 0xff))
#define MT_COOKIE_SIZE_ARG(c) ((__u32)(((c) >> 8) & 0xf))
#define MT_COOKIE_COUNT_ARG(c) ((__u32)(((c) >> 12) & 0xf))
#define MT_COOKIE_PTR_ARG(c) ((__u32)(((c) >> 16) & 0xf))
#define MT_COOKIE_OUT_ARG(c) ((__u32)(((c) >> 20) & 0xf))

#endif
