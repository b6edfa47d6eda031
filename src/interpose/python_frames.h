/* CPython's frames of the allocating thread, for the interposer's call
 * paths (wire/python.h): found in the process's own interpreter, checked
 * against a layout table, read without following a pointer that was not
 * bounded. */
#ifndef MEMTRACK_PYTHON_FRAMES_H
#define MEMTRACK_PYTHON_FRAMES_H

#include "wire/python.h"
#include "wire/shared_memory.h"
#include "wire/stack_table.h"

#define MT_PYTHON_KNOWN_CODES 64 /* code objects a thread keeps the identities of */
#define MT_PYTHON_KNOWN_LINES_BITS 8 /* a thread keeps the lines of 256 instructions */
#define MT_PYTHON_PLACE_BY_INSTRUCTION (1ull << 32) /* a place that is an instruction, not a line */

/* A code object whose identity a thread computed, and whether this process
 * defined it: valid while the members the identity is made of hold the same
 * values (a new code object at the same address has other members). */
struct mt_known_code {
  __u64 code; /* 0: empty */
  __u64 members[4]; /* co_filename, co_name, co_qualname, co_linetable */
  __s32 first_line;
  __u32 defined;
  __u64 id;
};

/* The line of an instruction of a code object (its identity), as a place
 * in call paths (mt_python_stack.place). */
struct mt_known_line {
  __u64 code; /* 0: empty */
  __u32 instruction;
  __u64 place;
};

/* A thread's Python stack as read at one allocation, and the code objects
 * it names that this process has not defined yet (their definitions, as
 * the ring takes them). */
struct mt_python_stack {
  __u32 frames;
  __u32 codes;
  __u32 code_bytes;
  __u32 deferred; /* a code object left for a later definition: the path must be defined again */
  /* Frames [kept_from, frames) are as the last read found them, at the
   * same indices: their mixed hashes still stand. */
  __u32 kept_from;
  struct mt_python_frame frame[MT_MAX_PYTHON_FRAMES];
  /* Where each frame is in its code for the path's hash: its line, so that
   * a line's instructions make one path (the definition carries the first
   * one, which the report gives the same line); its instruction, with
   * MT_PYTHON_PLACE_BY_INSTRUCTION, when the line table is not readable. */
  __u64 place[MT_MAX_PYTHON_FRAMES];
  /* The address of the eval loop's state (its _PyCFrame, on the C stack)
   * that runs each frame: where the frame goes among the native ones. */
  __u64 anchor[MT_MAX_PYTHON_FRAMES];
  /* mixed[i]: the codes and places of frames frames - 1 down to i, mixed
   * (the outermost first, so that a new innermost frame mixes itself alone;
   * no native part, so that it holds for the next allocation's native path,
   * mostly another: an object's, then its buffer's). */
  __u64 mixed[MT_MAX_PYTHON_FRAMES];
  /* next_run[i]: the first frame after i run by another eval loop (or
   * frames): the runs, each placed in a native frame as a whole. */
  __u8 next_run[MT_MAX_PYTHON_FRAMES];
#if MT_MAX_PYTHON_FRAMES > 255
#error "next_run holds frame indices in a byte"
#endif
  __u8 definitions[MT_PYTHON_CODE_BYTES];
  /* Kept across reads: deep stacks repeat the same code objects, and a
   * loop's allocations the same outer frames. The last read's frame i was
   * at frame_address[i], ran code_address[i] at prev_instr[i]; settled: its
   * code object was defined (or claimed) then. */
  struct mt_known_code known[MT_PYTHON_KNOWN_CODES];
  struct mt_known_line lines[1u << MT_PYTHON_KNOWN_LINES_BITS];
  __u64 frame_address[MT_MAX_PYTHON_FRAMES];
  __u64 code_address[MT_MAX_PYTHON_FRAMES];
  __u64 prev_instr[MT_MAX_PYTHON_FRAMES];
  __u8 settled[MT_MAX_PYTHON_FRAMES];
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

/* Mixes the frames `python` holds into `*hash` (the native path's), each
 * run of them (one eval loop's) placed inside the native frame of the
 * allocation's walk whose stack frame holds the loop's state (the walk's
 * `native_frames` frames, the i-th's CFA a __u64 at `cfas + i * stride`; at
 * the stack's end when `chain_final`, else a run outside the last native
 * frame goes after it). The place of each run's first frame is set. */
void mt_python_mix(struct mt_python_stack* python, const __u8* cfas, __u32 stride, __u32 native_frames,
                   int chain_final, __u64* hash);

/* Gives every frame its run's place (a path's definition carries them). */
void mt_python_place_frames(struct mt_python_stack* python);

#endif
