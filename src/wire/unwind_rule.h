/* What the stack walkers (the kernel's, bpf/stack.bpf.h, and the
 * interposer's, src/interpose/stack_walk.c) read to walk a call path: a
 * process's executable mappings and, by file offset of a return address, an
 * unwind rule (x86-64): how to find the caller's frame. Written by the
 * recorder alone: into the BPF maps (record/probes/bpf_session.cpp) and the stacks
 * file (stack_table.h, record/intake/shm_stacks.cpp); it derives the rules from
 * the modules' DWARF CFI (src/unwind/cfi_rules.cpp). */
#ifndef MEMTRACK_WIRE_UNWIND_RULE_H
#define MEMTRACK_WIRE_UNWIND_RULE_H

#include "types.h"

#define MT_MAX_MODULES 256 /* executable mappings per process the walker knows */

#define MT_CFA_RSP 0
#define MT_CFA_RBP 1

#define MT_RULE_RBP_SAVED 1   /* the caller's rbp is saved at CFA + rbp_offset */
#define MT_RULE_OUTERMOST 2   /* no caller: the return address is undefined */
#define MT_RULE_UNSUPPORTED 4 /* CFI the walker cannot follow */
/* A signal frame (sigreturn trampoline): always with MT_RULE_UNSUPPORTED, so
 * the kernel's walker stops there; the offline unwinder reads the ucontext. */
#define MT_RULE_SIGNAL_FRAME 8

struct mt_unwind_rule {
  __u8 cfa_reg;  /* MT_CFA_RSP or MT_CFA_RBP: the CFA is that register + cfa_offset */
  __u8 flags;    /* MT_RULE_* */
  __u16 reserved;
  __s32 cfa_offset;
  __s32 rbp_offset;
};

/* An executable mapping of a tracked process, for the walker: a return
 * address `pc` in [start, end) is at file offset pc - start + file_offset of
 * the file `file_id` (the recorder numbers the files it inspects). */
struct mt_module {
  __u64 start;
  __u64 end;
  __u64 file_offset;
  __u32 file_id;
  __u32 reserved;
};

struct mt_module_table {
  __u32 count; /* modules[0..count) sorted by start */
  __u32 reserved;
  struct mt_module modules[MT_MAX_MODULES];
};

/* Key of an unwind rule: the file offset of a return address in a file. */
struct mt_rule_key {
  __u32 file_id;
  __u32 reserved;
  __u64 file_offset;
};

#endif
