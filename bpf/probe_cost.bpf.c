/* The kernel's probe floor on this machine: the recorder attaches this empty
 * program to a function of its own, at entry and return as allocation
 * functions are probed, and times calls to it (src/record/probe_cost.cpp). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

/* For a uprobe session link, returning 0 asks for the return probe too. */
SEC("uprobe")
int probe_floor(void* ctx) { return 0; }
