/* Every allocator entry point the interposer (interpose.c) defines, with the
 * probe cookie (wire.h, MT_COOKIE) the uprobe path gives the same name
 * (src/record/probes/allocator_symbols.cpp): the interposer records a call as that
 * probe would. One list, read by the interposer and by the recorder's
 * attacher (src/record/probes/probe_attacher.cpp), which leaves a probe site to the
 * interposer when every name at its address is here. probe_sites_test checks
 * the cookies against the catalogue and that every site of glibc, jemalloc,
 * mimalloc and tcmalloc is covered.
 *
 * Left out: jemalloc's prefixed builds (je_*, _rjem_*: never the process's
 * malloc, so never reached through ours) and the unwinder's entry points. */
#ifndef MEMTRACK_INTERPOSED_NAMES_H
#define MEMTRACK_INTERPOSED_NAMES_H

#include "wire.h"

#define MT_IN_ALLOC(kind, size) MT_COOKIE(kind, size, MT_ARG_NONE, MT_ARG_NONE, MT_ARG_NONE)
#define MT_IN_ALLOC_N(kind, size, count) MT_COOKIE(kind, size, count, MT_ARG_NONE, MT_ARG_NONE)
#define MT_IN_RESIZE(ptr, size) MT_COOKIE(MT_REALLOC, size, MT_ARG_NONE, ptr, MT_ARG_NONE)
#define MT_IN_RESIZE_N(ptr, size, count) MT_COOKIE(MT_REALLOC, size, count, ptr, MT_ARG_NONE)
#define MT_IN_FREE(ptr) MT_COOKIE(MT_FREE, MT_ARG_NONE, MT_ARG_NONE, ptr, MT_ARG_NONE)
#define MT_IN_INTO(out, size) MT_COOKIE(MT_ALIGNED_ALLOC, size, MT_ARG_NONE, MT_ARG_NONE, out)

/* glibc's family: each has a wrapper of its own in interpose.c (the dlsym
 * arena, glibc's realloc(p, 0)). */
#define MT_INTERPOSED_LIBC(X)                               \
  X(malloc, MT_IN_ALLOC(MT_MALLOC, 0))                      \
  X(free, MT_IN_FREE(0))                                    \
  X(calloc, MT_IN_ALLOC_N(MT_CALLOC, 1, 0))                 \
  X(realloc, MT_IN_RESIZE(0, 1))                            \
  X(reallocarray, MT_IN_RESIZE_N(0, 2, 1))                  \
  X(posix_memalign, MT_IN_INTO(0, 2))                       \
  X(aligned_alloc, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 1))        \
  X(memalign, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 1))             \
  X(valloc, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))               \
  X(pvalloc, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))

/* The rest: one generic wrapper each, which reads its arguments as the
 * cookie says, as the BPF programs do. */
#define MT_INTERPOSED_OTHERS(X)                                            \
  X(free_sized, MT_IN_FREE(0))                                             \
  X(free_aligned_sized, MT_IN_FREE(0))                                     \
  X(cfree, MT_IN_FREE(0))                                                  \
  X(_Znwm, MT_IN_ALLOC(MT_MALLOC, 0))                                      \
  X(_Znam, MT_IN_ALLOC(MT_MALLOC, 0))                                      \
  X(_ZnwmRKSt9nothrow_t, MT_IN_ALLOC(MT_MALLOC, 0))                        \
  X(_ZnamRKSt9nothrow_t, MT_IN_ALLOC(MT_MALLOC, 0))                        \
  X(_ZnwmSt11align_val_t, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))                \
  X(_ZnamSt11align_val_t, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))                \
  X(_ZnwmSt11align_val_tRKSt9nothrow_t, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))  \
  X(_ZnamSt11align_val_tRKSt9nothrow_t, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))  \
  X(_ZdlPv, MT_IN_FREE(0))                                                 \
  X(_ZdaPv, MT_IN_FREE(0))                                                 \
  X(_ZdlPvm, MT_IN_FREE(0))                                                \
  X(_ZdaPvm, MT_IN_FREE(0))                                                \
  X(_ZdlPvSt11align_val_t, MT_IN_FREE(0))                                  \
  X(_ZdaPvSt11align_val_t, MT_IN_FREE(0))                                  \
  X(_ZdlPvmSt11align_val_t, MT_IN_FREE(0))                                 \
  X(_ZdaPvmSt11align_val_t, MT_IN_FREE(0))                                 \
  X(_ZdlPvRKSt9nothrow_t, MT_IN_FREE(0))                                   \
  X(_ZdaPvRKSt9nothrow_t, MT_IN_FREE(0))                                   \
  X(_ZdlPvSt11align_val_tRKSt9nothrow_t, MT_IN_FREE(0))                    \
  X(_ZdaPvSt11align_val_tRKSt9nothrow_t, MT_IN_FREE(0))                    \
  X(mallocx, MT_IN_ALLOC(MT_MALLOC, 0))                                    \
  X(rallocx, MT_IN_RESIZE(0, 1))                                           \
  X(dallocx, MT_IN_FREE(0))                                                \
  X(sdallocx, MT_IN_FREE(0))                                               \
  X(mi_malloc, MT_IN_ALLOC(MT_MALLOC, 0))                                  \
  X(mi_malloc_small, MT_IN_ALLOC(MT_MALLOC, 0))                            \
  X(mi_mallocn, MT_IN_ALLOC_N(MT_MALLOC, 1, 0))                            \
  X(mi_zalloc, MT_IN_ALLOC(MT_CALLOC, 0))                                  \
  X(mi_zalloc_small, MT_IN_ALLOC(MT_CALLOC, 0))                            \
  X(mi_calloc, MT_IN_ALLOC_N(MT_CALLOC, 1, 0))                             \
  X(mi_realloc, MT_IN_RESIZE(0, 1))                                        \
  X(mi_reallocf, MT_IN_RESIZE(0, 1))                                       \
  X(mi_rezalloc, MT_IN_RESIZE(0, 1))                                       \
  X(mi_reallocn, MT_IN_RESIZE_N(0, 2, 1))                                  \
  X(mi_recalloc, MT_IN_RESIZE_N(0, 2, 1))                                  \
  X(mi_reallocarray, MT_IN_RESIZE_N(0, 2, 1))                              \
  X(mi_free, MT_IN_FREE(0))                                                \
  X(mi_cfree, MT_IN_FREE(0))                                               \
  X(mi_free_size, MT_IN_FREE(0))                                           \
  X(mi_free_aligned, MT_IN_FREE(0))                                        \
  X(mi_free_size_aligned, MT_IN_FREE(0))                                   \
  X(mi_malloc_aligned, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))                   \
  X(mi_malloc_aligned_at, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))                \
  X(mi_zalloc_aligned, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))                   \
  X(mi_zalloc_aligned_at, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))                \
  X(mi_calloc_aligned, MT_IN_ALLOC_N(MT_ALIGNED_ALLOC, 1, 0))              \
  X(mi_calloc_aligned_at, MT_IN_ALLOC_N(MT_ALIGNED_ALLOC, 1, 0))           \
  X(mi_realloc_aligned, MT_IN_RESIZE(0, 1))                                \
  X(mi_realloc_aligned_at, MT_IN_RESIZE(0, 1))                             \
  X(mi_rezalloc_aligned, MT_IN_RESIZE(0, 1))                               \
  X(mi_rezalloc_aligned_at, MT_IN_RESIZE(0, 1))                            \
  X(mi_recalloc_aligned, MT_IN_RESIZE_N(0, 2, 1))                          \
  X(mi_recalloc_aligned_at, MT_IN_RESIZE_N(0, 2, 1))                       \
  X(mi_aligned_recalloc, MT_IN_RESIZE_N(0, 2, 1))                          \
  X(mi_aligned_offset_recalloc, MT_IN_RESIZE_N(0, 2, 1))                   \
  X(mi_aligned_alloc, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 1))                    \
  X(mi_memalign, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 1))                         \
  X(mi_posix_memalign, MT_IN_INTO(0, 2))                                   \
  X(mi_valloc, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))                           \
  X(mi_pvalloc, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))                          \
  X(mi_new, MT_IN_ALLOC(MT_MALLOC, 0))                                     \
  X(mi_new_nothrow, MT_IN_ALLOC(MT_MALLOC, 0))                             \
  X(mi_new_n, MT_IN_ALLOC_N(MT_MALLOC, 1, 0))                              \
  X(mi_new_aligned, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))                      \
  X(mi_new_aligned_nothrow, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))              \
  X(mi_new_realloc, MT_IN_RESIZE(0, 1))                                    \
  X(mi_new_reallocn, MT_IN_RESIZE_N(0, 2, 1))                              \
  X(tc_malloc, MT_IN_ALLOC(MT_MALLOC, 0))                                  \
  X(tc_malloc_skip_new_handler, MT_IN_ALLOC(MT_MALLOC, 0))                 \
  X(tc_calloc, MT_IN_ALLOC_N(MT_CALLOC, 1, 0))                             \
  X(tc_realloc, MT_IN_RESIZE(0, 1))                                        \
  X(tc_free, MT_IN_FREE(0))                                                \
  X(tc_free_sized, MT_IN_FREE(0))                                          \
  X(tc_cfree, MT_IN_FREE(0))                                               \
  X(tc_memalign, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 1))                         \
  X(tc_posix_memalign, MT_IN_INTO(0, 2))                                   \
  X(tc_valloc, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))                           \
  X(tc_pvalloc, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))                          \
  X(tc_new, MT_IN_ALLOC(MT_MALLOC, 0))                                     \
  X(tc_newarray, MT_IN_ALLOC(MT_MALLOC, 0))                                \
  X(tc_new_nothrow, MT_IN_ALLOC(MT_MALLOC, 0))                             \
  X(tc_newarray_nothrow, MT_IN_ALLOC(MT_MALLOC, 0))                        \
  X(tc_new_aligned, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))                      \
  X(tc_newarray_aligned, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))                 \
  X(tc_new_aligned_nothrow, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))              \
  X(tc_newarray_aligned_nothrow, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))         \
  X(tc_delete, MT_IN_FREE(0))                                              \
  X(tc_deletearray, MT_IN_FREE(0))                                         \
  X(tc_delete_nothrow, MT_IN_FREE(0))                                      \
  X(tc_deletearray_nothrow, MT_IN_FREE(0))                                 \
  X(tc_delete_sized, MT_IN_FREE(0))                                        \
  X(tc_deletearray_sized, MT_IN_FREE(0))                                   \
  X(tc_delete_aligned, MT_IN_FREE(0))                                      \
  X(tc_deletearray_aligned, MT_IN_FREE(0))                                 \
  X(tc_delete_sized_aligned, MT_IN_FREE(0))                                \
  X(tc_deletearray_sized_aligned, MT_IN_FREE(0))                           \
  X(tc_delete_aligned_nothrow, MT_IN_FREE(0))                              \
  X(tc_deletearray_aligned_nothrow, MT_IN_FREE(0))                         \
  X(__libc_malloc, MT_IN_ALLOC(MT_MALLOC, 0))                              \
  X(__libc_calloc, MT_IN_ALLOC_N(MT_CALLOC, 1, 0))                         \
  X(__libc_realloc, MT_IN_RESIZE(0, 1))                                    \
  X(__libc_free, MT_IN_FREE(0))                                            \
  X(__libc_cfree, MT_IN_FREE(0))                                           \
  X(__libc_memalign, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 1))                     \
  X(__libc_valloc, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))                       \
  X(__libc_pvalloc, MT_IN_ALLOC(MT_ALIGNED_ALLOC, 0))                      \
  X(__posix_memalign, MT_IN_INTO(0, 2))                                    \
  X(reallocf, MT_IN_RESIZE(0, 1))

#endif
