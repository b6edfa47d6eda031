/* Python frames in the interposer's stack definitions (stack_table.h's
 * rings): written by src/interpose/python_frames.c, read by
 * record/intake/ring_poller.cpp.
 *
 * A definition whose allocation ran Python code carries, after its chain, its
 * raw copy and its frame-pointer chain, `py_frames` struct mt_python_frame
 * (innermost first), then `py_codes` code definitions: each a struct
 * mt_python_code followed by its name, qualified name, file name and line
 * table bytes, padded to 8 bytes. A code object is defined once per process,
 * in the first definition that names it. */
#ifndef MEMTRACK_WIRE_PYTHON_H
#define MEMTRACK_WIRE_PYTHON_H

#include "types.h"

#define MT_PYTHON_FRAMES_ENV "MEMTRACK_PYTHON_FRAMES" /* "0": native frames only */
#define MT_MAX_PYTHON_FRAMES 128     /* deeper Python stacks keep their innermost frames */
#define MT_PYTHON_NAME_BYTES 512     /* a name, qualified name or file name longer is cut */
#define MT_PYTHON_LINE_TABLE_BYTES 16384 /* a longer line table is cut: later lines are unknown */
#define MT_PYTHON_CODE_BYTES 32768   /* code definitions in one stack definition, at most */
#define MT_PYTHON_BEFORE_FIRST 0xffffffffu /* instruction: the frame has not started its code */

struct mt_python_frame {
  __u64 code;        /* the code object's identity (mt_python_code.id) */
  __u32 instruction; /* index of the code unit it executes, or MT_PYTHON_BEFORE_FIRST */
  /* The chain index of the native frame that runs it (the eval loop's): the
   * Python frames go just inside it. The chain's length when the native walk
   * stopped before that frame. */
  __u32 native_index;
};

struct mt_python_code {
  __u64 id;
  __u32 first_line;
  __u16 name_len;
  __u16 qualname_len;
  __u16 filename_len;
  __u16 line_table_cut; /* the line table was longer than MT_PYTHON_LINE_TABLE_BYTES */
  __u32 line_table_len;
};

static inline unsigned long long mt_python_code_size(const struct mt_python_code* code) {
  return (sizeof(*code) + (unsigned long long)code->name_len + code->qualname_len + code->filename_len +
          code->line_table_len + 7) & ~7ull;
}

#endif
