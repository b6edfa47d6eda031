/* The interposer's stack walker (call paths): the kernel
 * walker's method (bpf/stack.bpf.h) on the thread's own stack, with the rules
 * and module tables the recorder shares (wire/stack_table.h). */
#ifndef MEMTRACK_STACK_WALK_H
#define MEMTRACK_STACK_WALK_H

#include "wire/shared_memory.h"

/* Maps the rule table named by MT_STACKS_ENV, if any. 1: stacks are captured
 * (or not asked for); 0: asked for but unusable, the process must stay with
 * the uprobes (whose kernel walker captures them). Before the process is ready. */
int mt_stacks_open(struct mt_shm_header* shm);
/* The same with the table at `path` (NULL: none asked for). */
int mt_stacks_open_at(struct mt_shm_header* shm, const char* path);
/* Unmaps what mt_stacks_open mapped, when no thread walks any more (a
 * recording attached to a running process is over). */
void mt_stacks_close(void);

/* Whether allocations carry stacks. */
int mt_stacks_on(void);

/* The stack hash of an allocation of `chunk`'s thread, whose wrapper's frame
 * (its saved rbp, then its return address) is at `frame`: the definition is
 * written to the chunk's ring first if this process has not defined the
 * path yet. 0: no stack (recording ended while waiting for room). */
__u64 mt_stack_capture(struct mt_shm_chunk* chunk, void* const* frame);

#endif
