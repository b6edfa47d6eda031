/* Source lines of CPython 3.11 code objects from their line tables
 * (co_linetable, the "location table" of the CPython source's
 * Objects/locations.md): what PyCode_Addr2Line answers. One decoder for
 * both sides, so that they agree on every instruction's line: the
 * interposer keys call paths by line (python_frames.c), the report names
 * each frame's line (symbolize/python_lines.h). */
#ifndef MEMTRACK_WIRE_PYTHON_LINE_TABLE_H
#define MEMTRACK_WIRE_PYTHON_LINE_TABLE_H

#include "types.h"
#include "python.h"

/* The entry kinds (bits 3-6 of an entry's first byte). */
#define MT_LINE_ENTRY_NO_LOCATION 15
#define MT_LINE_ENTRY_LONG 14
#define MT_LINE_ENTRY_NO_COLUMNS 13
#define MT_LINE_ENTRY_ONE_LINE_0 10

/* The unsigned varint (6 bits a byte, 0x40: more) at `at` of the table's
 * `size` bytes into `*value`; 0 when it runs past the table or holds more
 * than 32 bits. */
static inline int mt_line_table_varint(const __u8* table, __u64 size, __u64 at, __u32* value) {
  __u32 v = 0;
  for (unsigned shift = 0; shift < 32; shift += 6, ++at) {
    if (at >= size) return 0;
    __u8 b = table[at];
    v |= (__u32)(b & 63) << shift;
    if (!(b & 64)) {
      *value = v;
      return 1;
    }
  }
  return 0;
}

/* The line of code unit `instruction` (MT_PYTHON_BEFORE_FIRST: the frame
 * has not started, which CPython reports as the first line) in the `size`
 * bytes of `table`; 0 when the table says the instruction has no line, or
 * ends (or is damaged) before it. */
static inline __u32 mt_python_line(const __u8* table, __u64 size, __u32 first_line, __u32 instruction) {
  if (instruction == MT_PYTHON_BEFORE_FIRST) return first_line;
  __s64 line = first_line;
  __u64 start = 0; /* code units */
  for (__u64 at = 0; at < size;) {
    __u8 head = table[at];
    if (!(head & 128)) return 0; /* not an entry's start: damaged */
    int kind = (head >> 3) & 15;
    __s64 delta = 0;
    if (kind == MT_LINE_ENTRY_LONG || kind == MT_LINE_ENTRY_NO_COLUMNS) {
      __u32 v;
      if (!mt_line_table_varint(table, size, at + 1, &v)) return 0;
      delta = (v & 1) ? -(__s64)(v >> 1) : (__s64)(v >> 1);
    } else if (kind >= MT_LINE_ENTRY_ONE_LINE_0 && kind < MT_LINE_ENTRY_NO_COLUMNS) {
      delta = kind - MT_LINE_ENTRY_ONE_LINE_0;
    }
    line += delta;
    __u64 end = start + (head & 7) + 1;
    if (instruction < end) {
      if (kind == MT_LINE_ENTRY_NO_LOCATION || line <= 0 || line > 0xffffffffll) return 0;
      return (__u32)line;
    }
    start = end;
    /* To the next entry's first byte (the one with bit 7 set). */
    do ++at;
    while (at < size && !(table[at] & 128));
  }
  return 0;
}

#endif
