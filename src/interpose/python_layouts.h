/* The CPython layouts the interposer reads frames with, one per minor
 * version (x86-64), from the CPython headers of that version:
 * python_layout_test compiles them against every installed 3.11 (Debian's
 * /usr/include/python3.11, pyenv's) and compares with offsetof. Checked
 * again at run time against the interpreter itself (python_frames.c). */
#ifndef MEMTRACK_PYTHON_LAYOUTS_H
#define MEMTRACK_PYTHON_LAYOUTS_H

#include "wire/types.h"

struct python_layout {
  __u32 version; /* major << 8 | minor */
  /* PyThreadState */
  __u32 tstate_interp, tstate_cframe, tstate_thread_id, tstate_datastack_chunk, tstate_datastack_top,
      tstate_root_cframe;
  /* _PyCFrame */
  __u32 cframe_current_frame, cframe_previous;
  /* _PyInterpreterFrame */
  __u32 frame_code, frame_previous, frame_prev_instr, frame_is_entry, frame_size;
  /* PyCodeObject */
  __u32 code_filename, code_name, code_qualname, code_linetable, code_firstlineno, code_bytecode;
  /* _PyStackChunk */
  __u32 chunk_previous, chunk_size, chunk_data;
};

static const struct python_layout python_layouts[] = {
    {.version = 0x030b,
     .tstate_interp = 16,
     .tstate_cframe = 56,
     .tstate_thread_id = 152,
     .tstate_datastack_chunk = 296,
     .tstate_datastack_top = 304,
     .tstate_root_cframe = 336,
     .cframe_current_frame = 8,
     .cframe_previous = 16,
     .frame_code = 32,
     .frame_previous = 48,
     .frame_prev_instr = 56,
     .frame_is_entry = 68,
     .frame_size = 72,
     .code_filename = 112,
     .code_name = 120,
     .code_qualname = 128,
     .code_linetable = 136,
     .code_firstlineno = 72,
     .code_bytecode = 184,
     .chunk_previous = 0,
     .chunk_size = 8,
     .chunk_data = 24},
};

#endif
