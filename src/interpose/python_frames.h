/* CPython's frames of the allocating thread, for the interposer's call
 * paths (wire/python.h): found in the process's own interpreter, checked
 * against a layout table, read without following a pointer that was not
 * bounded. */
#ifndef MEMTRACK_PYTHON_FRAMES_H
#define MEMTRACK_PYTHON_FRAMES_H

#include "wire/python.h"
#include "wire/shared_memory.h"
#include "wire/stack_table.h"

/* A thread's Python stack as read at one allocation, and the code objects
 * it names that this process has not defined yet (their definitions, as
 * the ring takes them). */
struct mt_python_stack {
  __u32 frames;
  __u32 codes;
  __u32 code_bytes;
  __u32 deferred; /* a code object left for a later definition: the path must be defined again */
  struct mt_python_frame frame[MT_MAX_PYTHON_FRAMES];
  /* The address of the eval loop's state (its _PyCFrame, on the C stack)
   * that runs each frame: where the frame goes among the native ones. */
  __u64 anchor[MT_MAX_PYTHON_FRAMES];
  __u8 definitions[MT_PYTHON_CODE_BYTES];
};

/* Finds the interpreter of the process, if any, and checks its layout;
 * `pythonmalloc`: the PYTHONMALLOC variable's value (NULL when unset).
 * Counts in `counters` what it found. Before the process is ready. */
void mt_python_open(struct mt_stacks_header* counters, const char* pythonmalloc, __u32 pid);

/* Whether the process runs an interpreter whose frames are read. */
int mt_python_on(void);

/* Reads the calling thread's Python frames, innermost first, into `out`;
 * C-stack addresses are bounded by [stack_low, stack_high). `pid`: this
 * process's. 0 frames when the thread runs no Python code. */
void mt_python_read(struct mt_python_stack* out, __u64 stack_low, __u64 stack_high, __u32 pid);

#endif
