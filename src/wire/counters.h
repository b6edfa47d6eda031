/* Counters of the producers, copied by the recorder into the artifact's
 * trailer. The kernel keeps struct mt_kernel_counters in a per-CPU map
 * (bpf/state.bpf.h, `counters`), summed by record/probes/bpf_session.cpp; the
 * interposer adds to the counters of the shm files' headers (shared_memory.h,
 * stack_table.h), read by record/intake/shm_events.cpp and record/intake/shm_stacks.cpp.
 * The stack walk's outcomes are counted by both walkers, under the same
 * names (MT_WALK_COUNTERS): trailer counters stack_<name> (kernel) and
 * interposer_<name>. */
#ifndef MEMTRACK_WIRE_COUNTERS_H
#define MEMTRACK_WIRE_COUNTERS_H

#include "types.h"

/* X(name) per counter, in the order of the structs that hold them. */
#define MT_COUNTER_FIELD(name) __u64 name;

/* How walks ended (enum mt_stack_end), one counter per end but
 * MT_END_NOT_WALKED. */
#define MT_WALK_COUNTERS(X)                                                 \
  X(walks_complete)                                                         \
  X(walks_truncated)                                                        \
  X(walks_frame_limit)                                                      \
  X(walks_no_module)                                                        \
  X(walks_no_rule)                                                          \
  X(walks_unsupported)                                                      \
  X(walks_bad_frame)

/* The kernel's. */
#define MT_KERNEL_COUNTERS(X)                                                                                  \
  X(events_lost)               /* allocator ring full */                                                       \
  X(process_events_lost)       /* process ring full */                                                         \
  X(attach_requests_lost)      /* attach request could not be queued */                                        \
  X(pauses)                    /* producers stopped for back-pressure */                                       \
  X(nested_skipped)            /* inner allocator calls folded into the outer one */                           \
  X(runtime_frees)             /* glibc's own frees of what it holds (MT_COOKIE_RUNTIME_FREE): not recorded */ \
  X(handlers_nested_too_deep)  /* signal handlers run without their own allocator state */                     \
  X(stops_refused)             /* SIGSTOP refused by the kernel: the task ran on (and is not resumed) */       \
  /* Stack capture. */                                                                                         \
  X(stacks_captured)           /* allocations whose stack was copied */                                        \
  X(stack_copy_failed)         /* nothing of the stack could be read */                                        \
  MT_WALK_COUNTERS(X)                                                                                          \
  X(stack_definitions)         /* definitions emitted */                                                       \
  X(stack_definitions_lost)    /* stack ring full: the allocation carries no stack */                          \
  X(stack_scratch_busy)        /* per-CPU scratch in use (preempted capture): no stack */                      \
  /* Exceptions thrown inside a probed allocation call (bad_alloc): the                                        \
   * recorder puts the call's return address back before the unwinder runs. */                                \
  X(unwind_restores_requested)                                                                                 \
  X(unwind_restores_lost)      /* process ring full: the program may abort */                                  \
  X(stack_live_reads)          /* words a walk read from the live stack, past the copy */                      \
  X(stack_rewalks)             /* paths walked again at the return, once their rules were learned */           \
  /* Memory over time. */                                                                                      \
  X(rss_changes)               /* RSS counter changes of tracked processes */                                  \
  X(rss_changes_by_owner)      /* ... attributed through mm->owner (not the current task's) */                 \
  X(rss_unattributed)          /* changes of an address space without owner task (exiting) */                  \
  X(rss_records)               /* Rss records emitted (after coalescing) */                                    \
  X(memory_records_lost)       /* event ring full: an Rss or mapping record was lost */                        \
  X(map_calls)                 /* mmap/munmap/mremap/brk of tracked processes */                               \
  X(map_calls_in_allocator)    /* ... made by a probed allocator (counted by its allocation) */

struct mt_kernel_counters {
  MT_KERNEL_COUNTERS(MT_COUNTER_FIELD)
};

#endif
