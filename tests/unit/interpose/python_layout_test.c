/* The interposer's CPython layout table (src/interpose/python_layouts.h)
 * against the CPython headers it is compiled with (PYTHON_MINOR names the
 * table's row): every offset must be the headers' offsetof. Exits 1 naming
 * each difference. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>

#include "internal/pycore_code.h"
#include "internal/pycore_frame.h"
#include "interpose/python_layouts.h"

static int differences;

static void same(const char* what, unsigned table, size_t headers) {
  if (table == headers) return;
  printf("%s: the table has %u, the headers %zu\n", what, table, headers);
  ++differences;
}

int main(void) {
  const struct python_layout* l = NULL;
  for (size_t i = 0; i < sizeof(python_layouts) / sizeof(python_layouts[0]); ++i)
    if (python_layouts[i].version == (PY_MAJOR_VERSION << 8 | PY_MINOR_VERSION)) l = &python_layouts[i];
  if (!l) {
    printf("no layout for Python %d.%d\n", PY_MAJOR_VERSION, PY_MINOR_VERSION);
    return 1;
  }
  same("PyThreadState.interp", l->tstate_interp, offsetof(PyThreadState, interp));
  same("PyThreadState.cframe", l->tstate_cframe, offsetof(PyThreadState, cframe));
  same("PyThreadState.thread_id", l->tstate_thread_id, offsetof(PyThreadState, thread_id));
  same("PyThreadState.datastack_chunk", l->tstate_datastack_chunk, offsetof(PyThreadState, datastack_chunk));
  same("PyThreadState.datastack_top", l->tstate_datastack_top, offsetof(PyThreadState, datastack_top));
  same("PyThreadState.root_cframe", l->tstate_root_cframe, offsetof(PyThreadState, root_cframe));
  same("_PyCFrame.current_frame", l->cframe_current_frame, offsetof(_PyCFrame, current_frame));
  same("_PyCFrame.previous", l->cframe_previous, offsetof(_PyCFrame, previous));
  same("_PyInterpreterFrame.f_code", l->frame_code, offsetof(_PyInterpreterFrame, f_code));
  same("_PyInterpreterFrame.previous", l->frame_previous, offsetof(_PyInterpreterFrame, previous));
  same("_PyInterpreterFrame.prev_instr", l->frame_prev_instr, offsetof(_PyInterpreterFrame, prev_instr));
  same("_PyInterpreterFrame.is_entry", l->frame_is_entry, offsetof(_PyInterpreterFrame, is_entry));
  same("_PyInterpreterFrame (header)", l->frame_size, offsetof(_PyInterpreterFrame, localsplus));
  same("PyCodeObject.co_filename", l->code_filename, offsetof(PyCodeObject, co_filename));
  same("PyCodeObject.co_name", l->code_name, offsetof(PyCodeObject, co_name));
  same("PyCodeObject.co_qualname", l->code_qualname, offsetof(PyCodeObject, co_qualname));
  same("PyCodeObject.co_linetable", l->code_linetable, offsetof(PyCodeObject, co_linetable));
  same("PyCodeObject.co_firstlineno", l->code_firstlineno, offsetof(PyCodeObject, co_firstlineno));
  same("PyCodeObject.co_code_adaptive", l->code_bytecode, offsetof(PyCodeObject, co_code_adaptive));
  same("_PyStackChunk.previous", l->chunk_previous, offsetof(_PyStackChunk, previous));
  same("_PyStackChunk.size", l->chunk_size, offsetof(_PyStackChunk, size));
  same("_PyStackChunk.data", l->chunk_data, offsetof(_PyStackChunk, data));
  /* The object headers python_frames.c reads without a table. */
  same("PyObject.ob_type", 8, offsetof(PyObject, ob_type));
  same("PyVarObject.ob_size", 16, offsetof(PyVarObject, ob_size));
  same("PyTypeObject.tp_basicsize", 32, offsetof(PyTypeObject, tp_basicsize));
  same("PyTypeObject.tp_members", 240, offsetof(PyTypeObject, tp_members));
  same("PyASCIIObject (data)", 48, sizeof(PyASCIIObject));
  same("PyCompactUnicodeObject (data)", 72, sizeof(PyCompactUnicodeObject));
  same("PyCompactUnicodeObject.utf8", 56, offsetof(PyCompactUnicodeObject, utf8));
  same("PyBytesObject.ob_sval", 32, offsetof(PyBytesObject, ob_sval));
  printf("Python %d.%d: %s\n", PY_MAJOR_VERSION, PY_MINOR_VERSION, differences ? "differs" : "the table agrees");
  return differences != 0;
}
