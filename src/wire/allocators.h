/* The allocator catalogue: every allocator entry point memtrack knows, with
 * the probe cookie (probe_cookie.h) that describes its arguments, in one list
 * for C and C++. The recorder probes every name found in an ELF file
 * (record/probes/allocator_symbols.cpp: the catalogue's order is its rank, the
 * first name at an address names the site); the interposer defines the
 * names of MT_INTERPOSED_* and reads a call's arguments as that name's probe
 * does (src/interpose/interpose.c); the recorder's attacher leaves a site to
 * the interposer when every name at its address is one of those
 * (record/probes/probe_attacher.cpp). The kernel decodes the cookies
 * (bpf/alloc.bpf.c).
 *
 * Each list is X(name, cookie). Kinds: plain allocation MT_MALLOC; zeroing
 * without alignment MT_CALLOC; any explicit alignment (including page
 * alignment: valloc, pvalloc) wins over zeroing and gives MT_ALIGNED_ALLOC;
 * anything that takes an old block and returns a new one MT_REALLOC. */
#ifndef MEMTRACK_WIRE_ALLOCATORS_H
#define MEMTRACK_WIRE_ALLOCATORS_H

#include "events.h"
#include "probe_cookie.h"

/* Cookie builders; arguments are 0-based argument indexes. */
#define MT_ALLOCATES(kind, size) MT_COOKIE(kind, size, MT_ARG_NONE, MT_ARG_NONE, MT_ARG_NONE)
#define MT_ALLOCATES_N(kind, size, count) MT_COOKIE(kind, size, count, MT_ARG_NONE, MT_ARG_NONE)
#define MT_RESIZES(ptr, size) MT_COOKIE(MT_REALLOC, size, MT_ARG_NONE, ptr, MT_ARG_NONE)
#define MT_RESIZES_N(ptr, size, count) MT_COOKIE(MT_REALLOC, size, count, ptr, MT_ARG_NONE)
#define MT_FREES(ptr) MT_COOKIE(MT_FREE, MT_ARG_NONE, MT_ARG_NONE, ptr, MT_ARG_NONE)
/* Returns 0 on success and stores the block through argument `out`. */
#define MT_ALLOCATES_INTO(out, size) MT_COOKIE(MT_ALIGNED_ALLOC, size, MT_ARG_NONE, MT_ARG_NONE, out)
/* Probed at entry, records nothing: an exception starts unwinding. */
#define MT_UNWINDS MT_COOKIE(MT_UNWIND, MT_ARG_NONE, MT_ARG_NONE, MT_ARG_NONE, MT_ARG_NONE)

/* The C library family (MT_ALLOCATORS_LIBC); jemalloc also exports it with
 * the "je_" and "_rjem_" (Rust tikv-jemallocator) prefixes. First glibc's
 * own, each of which has a wrapper of its own in the interposer (the dlsym
 * arena, glibc's realloc(p, 0)), then the rest. */
#define MT_ALLOCATORS_GLIBC(X)                                                                   \
  X(malloc, MT_ALLOCATES(MT_MALLOC, 0))                                                          \
  X(calloc, MT_ALLOCATES_N(MT_CALLOC, 1, 0))                                                     \
  X(realloc, MT_RESIZES(0, 1))                                                                   \
  X(free, MT_FREES(0))                                                                           \
  X(aligned_alloc, MT_ALLOCATES(MT_ALIGNED_ALLOC, 1))    /* (alignment, size) */                 \
  X(posix_memalign, MT_ALLOCATES_INTO(0, 2))             /* (out, alignment, size) */            \
  X(memalign, MT_ALLOCATES(MT_ALIGNED_ALLOC, 1))         /* (alignment, size) */                 \
  X(valloc, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0))                                                   \
  X(pvalloc, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0))          /* the size before rounding to pages */ \
  X(reallocarray, MT_RESIZES_N(0, 2, 1))                 /* (ptr, count, size) */

#define MT_ALLOCATORS_LIBC_MORE(X)                                                        \
  X(free_sized, MT_FREES(0))                             /* C23 (ptr, size) */            \
  X(free_aligned_sized, MT_FREES(0))                     /* C23 (ptr, alignment, size) */ \
  X(cfree, MT_FREES(0))

#define MT_ALLOCATORS_LIBC(X) MT_ALLOCATORS_GLIBC(X) MT_ALLOCATORS_LIBC_MORE(X)

/* Itanium C++ ABI operator new / delete for a 64-bit size_t. */
#define MT_ALLOCATORS_CXX(X)                                                         \
  X(_Znwm, MT_ALLOCATES(MT_MALLOC, 0))                                               \
  X(_Znam, MT_ALLOCATES(MT_MALLOC, 0))                                               \
  X(_ZnwmRKSt9nothrow_t, MT_ALLOCATES(MT_MALLOC, 0))                                 \
  X(_ZnamRKSt9nothrow_t, MT_ALLOCATES(MT_MALLOC, 0))                                 \
  X(_ZnwmSt11align_val_t, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0)) /* (size, alignment) */ \
  X(_ZnamSt11align_val_t, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0))                         \
  X(_ZnwmSt11align_val_tRKSt9nothrow_t, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0))           \
  X(_ZnamSt11align_val_tRKSt9nothrow_t, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0))           \
  X(_ZdlPv, MT_FREES(0))                                                             \
  X(_ZdaPv, MT_FREES(0))                                                             \
  X(_ZdlPvm, MT_FREES(0))                                                            \
  X(_ZdaPvm, MT_FREES(0))                                                            \
  X(_ZdlPvSt11align_val_t, MT_FREES(0))                                              \
  X(_ZdaPvSt11align_val_t, MT_FREES(0))                                              \
  X(_ZdlPvmSt11align_val_t, MT_FREES(0))                                             \
  X(_ZdaPvmSt11align_val_t, MT_FREES(0))                                             \
  X(_ZdlPvRKSt9nothrow_t, MT_FREES(0))                                               \
  X(_ZdaPvRKSt9nothrow_t, MT_FREES(0))                                               \
  X(_ZdlPvSt11align_val_tRKSt9nothrow_t, MT_FREES(0))                                \
  X(_ZdaPvSt11align_val_tRKSt9nothrow_t, MT_FREES(0))

/* jemalloc's non-standard API. xallocx is left out: it resizes in place and
 * returns the new usable size, not a block, so the return probe has no address
 * to record and the size change has no event kind. */
#define MT_ALLOCATORS_JEMALLOC(X)                                                 \
  X(mallocx, MT_ALLOCATES(MT_MALLOC, 0))                 /* (size, flags) */      \
  X(rallocx, MT_RESIZES(0, 1))                           /* (ptr, size, flags) */ \
  X(dallocx, MT_FREES(0))                                /* (ptr, flags) */       \
  X(sdallocx, MT_FREES(0))                               /* (ptr, size, flags) */

/* mimalloc's mi_ API (mimalloc.h). Left out: the mi_heap_* API (an explicit
 * heap argument; mi_realloc, mi_malloc_aligned... tail-call it, so probing it
 * would double the probes on those paths), mi_expand (in-place like xallocx),
 * mi_reallocarr (takes a pointer to the pointer; the old block cannot be
 * named by a cookie), and the string duplicators mi_strdup, mi_strndup,
 * mi_wcsdup, mi_mbsdup, mi_realpath, mi_dupenv_s, mi_wdupenv_s (no size
 * argument: the size is a string length). */
#define MT_ALLOCATORS_MIMALLOC(X)                                                             \
  X(mi_malloc, MT_ALLOCATES(MT_MALLOC, 0))                                                    \
  X(mi_malloc_small, MT_ALLOCATES(MT_MALLOC, 0))                                              \
  X(mi_mallocn, MT_ALLOCATES_N(MT_MALLOC, 1, 0))         /* (count, size) */                  \
  X(mi_zalloc, MT_ALLOCATES(MT_CALLOC, 0))               /* (size): no count argument */      \
  X(mi_zalloc_small, MT_ALLOCATES(MT_CALLOC, 0))                                              \
  X(mi_calloc, MT_ALLOCATES_N(MT_CALLOC, 1, 0))                                               \
  X(mi_realloc, MT_RESIZES(0, 1))                                                             \
  X(mi_reallocf, MT_RESIZES(0, 1))                                                            \
  X(mi_rezalloc, MT_RESIZES(0, 1))                                                            \
  X(mi_reallocn, MT_RESIZES_N(0, 2, 1))                  /* (ptr, count, size) */             \
  X(mi_recalloc, MT_RESIZES_N(0, 2, 1))                  /* (ptr, count, size) */             \
  X(mi_reallocarray, MT_RESIZES_N(0, 2, 1))              /* (ptr, count, size) */             \
  X(mi_free, MT_FREES(0))                                                                     \
  X(mi_cfree, MT_FREES(0))                                                                    \
  X(mi_free_size, MT_FREES(0))                                                                \
  X(mi_free_aligned, MT_FREES(0))                                                             \
  X(mi_free_size_aligned, MT_FREES(0))                                                        \
  X(mi_malloc_aligned, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0)) /* (size, alignment) */             \
  X(mi_malloc_aligned_at, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0)) /* (size, alignment, offset) */  \
  X(mi_zalloc_aligned, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0)) /* (size, alignment) */             \
  X(mi_zalloc_aligned_at, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0))                                  \
  X(mi_calloc_aligned, MT_ALLOCATES_N(MT_ALIGNED_ALLOC, 1, 0)) /* (count, size, alignment) */ \
  X(mi_calloc_aligned_at, MT_ALLOCATES_N(MT_ALIGNED_ALLOC, 1, 0))                             \
  X(mi_realloc_aligned, MT_RESIZES(0, 1))                /* (ptr, size, alignment) */         \
  X(mi_realloc_aligned_at, MT_RESIZES(0, 1))                                                  \
  X(mi_rezalloc_aligned, MT_RESIZES(0, 1))                                                    \
  X(mi_rezalloc_aligned_at, MT_RESIZES(0, 1))                                                 \
  X(mi_recalloc_aligned, MT_RESIZES_N(0, 2, 1))          /* (ptr, count, size, alignment) */  \
  X(mi_recalloc_aligned_at, MT_RESIZES_N(0, 2, 1))                                            \
  X(mi_aligned_recalloc, MT_RESIZES_N(0, 2, 1))          /* (ptr, count, size, alignment) */  \
  X(mi_aligned_offset_recalloc, MT_RESIZES_N(0, 2, 1))   /* (..., alignment, offset) */       \
  X(mi_aligned_alloc, MT_ALLOCATES(MT_ALIGNED_ALLOC, 1)) /* (alignment, size) */              \
  X(mi_memalign, MT_ALLOCATES(MT_ALIGNED_ALLOC, 1))      /* (alignment, size) */              \
  X(mi_posix_memalign, MT_ALLOCATES_INTO(0, 2))                                               \
  X(mi_valloc, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0))                                             \
  X(mi_pvalloc, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0))                                            \
  X(mi_new, MT_ALLOCATES(MT_MALLOC, 0))                                                       \
  X(mi_new_nothrow, MT_ALLOCATES(MT_MALLOC, 0))                                               \
  X(mi_new_n, MT_ALLOCATES_N(MT_MALLOC, 1, 0))           /* (count, size) */                  \
  X(mi_new_aligned, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0))   /* (size, alignment) */              \
  X(mi_new_aligned_nothrow, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0))                                \
  X(mi_new_realloc, MT_RESIZES(0, 1))                                                         \
  X(mi_new_reallocn, MT_RESIZES_N(0, 2, 1))              /* (ptr, count, size) */

/* gperftools tcmalloc's tc_ API (gperftools/tcmalloc.h). */
#define MT_ALLOCATORS_TCMALLOC(X)                                                \
  X(tc_malloc, MT_ALLOCATES(MT_MALLOC, 0))                                       \
  X(tc_malloc_skip_new_handler, MT_ALLOCATES(MT_MALLOC, 0))                      \
  X(tc_calloc, MT_ALLOCATES_N(MT_CALLOC, 1, 0))                                  \
  X(tc_realloc, MT_RESIZES(0, 1))                                                \
  X(tc_free, MT_FREES(0))                                                        \
  X(tc_free_sized, MT_FREES(0))                          /* (ptr, size) */       \
  X(tc_cfree, MT_FREES(0))                                                       \
  X(tc_memalign, MT_ALLOCATES(MT_ALIGNED_ALLOC, 1))      /* (alignment, size) */ \
  X(tc_posix_memalign, MT_ALLOCATES_INTO(0, 2))                                  \
  X(tc_valloc, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0))                                \
  X(tc_pvalloc, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0))                               \
  X(tc_new, MT_ALLOCATES(MT_MALLOC, 0))                                          \
  X(tc_newarray, MT_ALLOCATES(MT_MALLOC, 0))                                     \
  X(tc_new_nothrow, MT_ALLOCATES(MT_MALLOC, 0))                                  \
  X(tc_newarray_nothrow, MT_ALLOCATES(MT_MALLOC, 0))                             \
  X(tc_new_aligned, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0))   /* (size, alignment) */ \
  X(tc_newarray_aligned, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0))                      \
  X(tc_new_aligned_nothrow, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0))                   \
  X(tc_newarray_aligned_nothrow, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0))              \
  X(tc_delete, MT_FREES(0))                                                      \
  X(tc_deletearray, MT_FREES(0))                                                 \
  X(tc_delete_nothrow, MT_FREES(0))                                              \
  X(tc_deletearray_nothrow, MT_FREES(0))                                         \
  X(tc_delete_sized, MT_FREES(0))                                                \
  X(tc_deletearray_sized, MT_FREES(0))                                           \
  X(tc_delete_aligned, MT_FREES(0))                                              \
  X(tc_deletearray_aligned, MT_FREES(0))                                         \
  X(tc_delete_sized_aligned, MT_FREES(0))                                        \
  X(tc_deletearray_sized_aligned, MT_FREES(0))                                   \
  X(tc_delete_aligned_nothrow, MT_FREES(0))                                      \
  X(tc_deletearray_aligned_nothrow, MT_FREES(0))

/* Exported glibc-compatible names that replacement allocators (tcmalloc,
 * mimalloc, jemalloc's override option) define so that callers of
 * __libc_malloc and friends reach them too; in glibc they alias the public
 * names. reallocf (BSD) is mimalloc's. Left out on purpose: mimalloc's
 * _aligned_malloc takes (alignment, size) where MSVC's takes (size,
 * alignment), and vfree is too generic a name to trust as free(). */
#define MT_ALLOCATORS_COMPAT(X)                         \
  X(__libc_malloc, MT_ALLOCATES(MT_MALLOC, 0))          \
  X(__libc_calloc, MT_ALLOCATES_N(MT_CALLOC, 1, 0))     \
  X(__libc_realloc, MT_RESIZES(0, 1))                   \
  X(__libc_free, MT_FREES(0))                           \
  X(__libc_cfree, MT_FREES(0))                          \
  X(__libc_memalign, MT_ALLOCATES(MT_ALIGNED_ALLOC, 1)) \
  X(__libc_valloc, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0))   \
  X(__libc_pvalloc, MT_ALLOCATES(MT_ALIGNED_ALLOC, 0))  \
  X(__posix_memalign, MT_ALLOCATES_INTO(0, 2))          \
  X(reallocf, MT_RESIZES(0, 1))

/* Where a C++ exception begins (libstdc++) and where unwinding starts
 * (libgcc's unwinder), shared or linked in: probed at entry so that an
 * exception thrown inside a probed allocation call can pass its return
 * (alloc.bpf.c, on_unwind). */
#define MT_ALLOCATORS_UNWINDER(X)                                                                       \
  X(__cxa_allocate_exception, MT_UNWINDS)                /* throw, before the exception's own malloc */ \
  X(_Unwind_RaiseException, MT_UNWINDS)                  /* throw (also of foreign exceptions) */       \
  X(_Unwind_Resume_or_Rethrow, MT_UNWINDS)               /* rethrow */                                  \
  X(_Unwind_ForcedUnwind, MT_UNWINDS)                    /* thread cancellation, forced unwinding */

/* What the interposer defines. Left out: jemalloc's prefixed builds (je_*,
 * _rjem_*: never the process's malloc, so never reached through ours) and
 * the unwinder's entry points. glibc's family has wrappers of its own; the
 * others, one generic wrapper each, which reads its arguments as the cookie
 * says, as the BPF programs do. probe_sites_test checks that every site of
 * glibc, jemalloc, mimalloc and tcmalloc is covered. */
#define MT_INTERPOSED_LIBC(X) MT_ALLOCATORS_GLIBC(X)
#define MT_INTERPOSED_OTHERS(X)                                                                       \
  MT_ALLOCATORS_LIBC_MORE(X)                                                                          \
  MT_ALLOCATORS_CXX(X)                                                                                \
  MT_ALLOCATORS_JEMALLOC(X)                                                                           \
  MT_ALLOCATORS_MIMALLOC(X)                                                                           \
  MT_ALLOCATORS_TCMALLOC(X)                                                                           \
  MT_ALLOCATORS_COMPAT(X)

#endif
