/* The fixed-width types of every wire header (__u8 .. __u64, __s32): the
 * running kernel's BTF (vmlinux.h, generated into the BPF build directory)
 * in the BPF programs, the UAPI's <linux/types.h> in the interposer (C) and
 * the recorder (C++). Included first by each header of src/wire/. */
#ifndef MEMTRACK_WIRE_TYPES_H
#define MEMTRACK_WIRE_TYPES_H

#ifdef __BPF__
#include <vmlinux.h>
#else
#include <linux/types.h>
#endif

#endif
