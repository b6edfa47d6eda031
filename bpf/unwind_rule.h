/* One unwind rule of the in-kernel stack walker (x86-64): how to find the
 * caller's frame from a return address. User space derives it from the
 * module's DWARF CFI (src/unwind/cfi_rules.cpp). */
#ifndef MEMTRACK_UNWIND_RULE_H
#define MEMTRACK_UNWIND_RULE_H

#ifdef __BPF__
#include "vmlinux.h"
#else
#include <linux/types.h>
#endif

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

#endif
