/* Structures and constants shared by the BPF programs and the C++ recorder.
 * One definition of each wire struct: both sides include this file. */
#ifndef MEMTRACK_WIRE_H
#define MEMTRACK_WIRE_H

#ifdef __BPF__
#include "vmlinux.h"
#else
#include <linux/types.h>
#endif

/* Kinds of records on the event rings. The C++ side maps them to EventType. */
enum mt_kind {
  MT_MALLOC = 1,
  MT_CALLOC = 2,
  MT_REALLOC = 3,
  MT_ALIGNED_ALLOC = 4,
  MT_FREE = 5,
  MT_FORK = 6,
  MT_EXEC = 7,
  MT_EXIT = 8,
  MT_ATTACH_REQUEST = 9, /* a tracked task mapped an unknown executable file */
  MT_UNWIND = 10,        /* probe kind only: an exception starts unwinding */
  MT_RESTORE_RETURNS = 11, /* process ring: put return addresses back (struct mt_return_restore) */
  MT_INTERPOSED = 12,      /* process ring: the process's interposer records from now on */
  /* Memory over time, on the event ring as struct mt_memory_event. */
  MT_RSS = 13,    /* a process's RSS counter `member` is now `size` bytes */
  MT_MMAP = 14,   /* anonymous mmap outside the allocators: [addr, addr + size) */
  MT_MUNMAP = 15, /* munmap outside the allocators: [addr, addr + size) */
  MT_MREMAP = 16, /* mremap outside the allocators: [old_addr, + old_size) moved to [addr, + size) */
  MT_BRK = 17,    /* the program break moved from old_addr to addr outside the allocators */
  MT_OWN_MEMORY = 18, /* memtrack's own memory in the process: counter `member` (or MT_OWN_MAPPED) is `size` bytes */
};

/* One allocator event; fixed size so the hot path never sizes a record. */
struct mt_alloc_event {
  __u64 timestamp; /* bpf_ktime_get_ns: CLOCK_MONOTONIC */
  __u32 pid;       /* thread group id */
  __u32 tid;
  __u64 addr;      /* the block (realloc: the new block) */
  __u64 size;
  __u64 old_addr;  /* realloc only */
  __u64 stack_hash; /* the call path's definition (stack ring); 0: none */
  __u32 kind;      /* enum mt_kind */
  __u32 reserved;
};

/* A memory record on the event ring: the same size as mt_alloc_event, with
 * `kind` at the same offset, so the poller tells them apart by kind. */
struct mt_memory_event {
  __u64 timestamp;
  __u32 pid;
  __u32 tid;
  __u64 addr;
  __u64 size;      /* MT_RSS: the counter's value in bytes */
  __u64 old_addr;  /* MT_MREMAP, MT_BRK */
  __u64 old_size;  /* MT_MREMAP */
  __u32 kind;      /* enum mt_kind */
  __u32 member;    /* MT_RSS: the kernel's counter, enum mt_rss_member */
};

/* The kernel's RSS counters (NR_MM_COUNTERS order). */
enum mt_rss_member {
  MT_RSS_FILE = 0,
  MT_RSS_ANON = 1,
  MT_RSS_SWAP = 2,
  MT_RSS_SHMEM = 3,
  MT_RSS_MEMBERS = 4,
  /* MT_OWN_MEMORY only: the anonymous mappings the interposer made itself. */
  MT_OWN_MAPPED = 4,
};

/* Stack capture. */
#define MT_MAX_STACK_BYTES 32768 /* copy budget cap: one per-CPU scratch value */
#define MT_MAX_FRAMES 256        /* walk depth limit */
#define MT_STACK_REGS 17         /* DWARF-numbered: 0 rax 1 rdx 2 rcx 3 rbx 4 rsi 5 rdi 6 rbp 7 rsp 8-15 r8-r15 16 rip */
#define MT_MAX_MODULES 256       /* executable mappings per process the walker knows */
#define MT_MAX_FP_FRAMES 127     /* the kernel's frame-pointer walk (bpf_get_stack) */

enum mt_stack_mode {
  MT_STACKS_OFF = 0,
  MT_STACKS_WALK = 1, /* walk the copy with unwind rules; raw bytes only when the walk cannot finish */
  MT_STACKS_RAW = 2,  /* the seed's (CodSpeed memtrack's) method: hash and keep the raw bytes */
};

/* Why a walk ended; the C++ side maps it to StackEnd. */
enum mt_stack_end {
  MT_END_COMPLETE = 0,
  MT_END_TRUNCATED = 1, /* the next frame's words could not be read */
  MT_END_NO_MODULE = 2,
  MT_END_NO_RULE = 3,
  MT_END_UNSUPPORTED = 4,
  MT_END_BAD_FRAME = 5,
  MT_END_NOT_WALKED = 6,
  MT_END_FRAME_LIMIT = 7, /* MT_MAX_FRAMES frames recorded, and the path goes on */
};

/* A walk that went as far as a walk can: its chain is the whole definition,
 * shared by every capture of the path (the others stopped short and keep the
 * raw copy for the offline unwinder). */
#define MT_END_CHAIN_IS_FINAL(end) \
  ((end) == MT_END_COMPLETE || (end) == MT_END_TRUNCATED || (end) == MT_END_FRAME_LIMIT)

/* A definition of a walk short of a rule: the kernel stopped the process
 * (resumed once the path's rules are learned), or the interposer's thread
 * waits in the allocator for them (src/interpose/stack_walk.c). Either way its
 * callers' frames are as walked: the learner may read its live stack. */
enum mt_stack_wait {
  MT_STACK_NOT_WAITING = 0,
  MT_STACK_STOPPED = 1,
  MT_STACK_THREAD_WAITS = 2,
};

/* A stack definition on the stack ring: this header, then `frames` return
 * addresses (u64), then `raw_len` bytes of the copied stack and `fp_frames`
 * addresses of the kernel's frame-pointer walk (both only when the walk did
 * not complete, or in raw mode). */
struct mt_stack_header {
  __u64 hash;
  __u64 timestamp;
  __u32 pid;
  __u32 tid;
  __u32 frames;
  __u32 end;       /* enum mt_stack_end */
  __u64 miss_pc;   /* where a walk ended for want of a module or rule */
  __u64 sp;        /* the user sp the copy starts at */
  __u32 raw_len;
  __u8 truncated;  /* the copy stopped at the budget, not the stack's end */
  __u8 stopped;    /* enum mt_stack_wait: who waits until the walk's rules are learned */
  __u16 fp_frames;
  __u64 regs[MT_STACK_REGS];
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

/* Return address slots of probed calls that an exception is about to unwind
 * through: each holds the uretprobe trampoline (`expected`) and must hold
 * `original` again before the unwinder reads it. The thread waits stopped. */
#define MT_MAX_RESTORES 8
struct mt_return_slot {
  __u64 address;
  __u64 expected;
  __u64 original;
};
struct mt_return_restore {
  __u32 count;
  __u32 reserved;
  struct mt_return_slot slots[MT_MAX_RESTORES];
};

#define MT_COMM_LEN 16
#define MT_PATH_LEN 256
#define MT_ARGS_LEN 512

/* Process lifecycle records and attach requests: rare, so one generous
 * fixed-size struct. Strings are NUL-terminated; args holds argv as
 * consecutive NUL-terminated strings, args_len bytes in all. */
struct mt_process_event {
  __u64 timestamp;
  __u32 pid;
  __u32 tid;
  __u32 kind;       /* MT_FORK, MT_EXEC, MT_EXIT, MT_ATTACH_REQUEST, MT_RESTORE_RETURNS */
  __u32 parent_pid; /* fork */
  __s32 exit_code;  /* exit: the group's exit code (wait status form) */
  __u32 args_len;   /* exec */
  __u32 flags;      /* attach request: MT_REQUEST_*; MT_RECORD_STOPPED */
  __u32 reserved;
  __u64 dev;        /* attach request: the file's st_dev (kernel encoding) */
  __u64 ino;        /* attach request: inode number */
  char comm[MT_COMM_LEN];
  char path[MT_PATH_LEN]; /* exec: the filename passed to execve */
  union {
    char args[MT_ARGS_LEN];          /* exec */
    struct mt_return_restore restore; /* MT_RESTORE_RETURNS */
  };
};

/* An attach request asking for every probe of the process to be made anew:
 * a thread other than the leader exec'd, and the kernel made it the leader,
 * so probes filtered on the old leader no longer match the process. */
#define MT_REQUEST_RENEW 1u
/* The kernel stopped the task for this record (MT_RESTORE_RETURNS): the
 * recorder resumes it once done, and only then. */
#define MT_RECORD_STOPPED 2u

/* The probe cookie describes an allocator function's arguments, so one pair
 * of BPF programs serves every allocator entry point.
 *   bits 0..7   enum mt_kind of the event to emit
 *   bits 8..11  index of the size argument            (MT_ARG_NONE: none)
 *   bits 12..15 index of the element-count argument   (size is count*size)
 *   bits 16..19 index of the old-pointer argument     (realloc family, free)
 *   bits 20..23 index of the out-pointer argument     (posix_memalign: the
 *               function returns 0 on success and stores the block there) */
#define MT_ARG_NONE 0xfu
#define MT_COOKIE(kind, size_arg, count_arg, ptr_arg, out_arg)                          \
  ((__u64)(kind) | ((__u64)(size_arg) << 8) | ((__u64)(count_arg) << 12) |             \
   ((__u64)(ptr_arg) << 16) | ((__u64)(out_arg) << 20))
/* Bit 24: a glibc entry point the interposer (src/interpose/) takes; in a
 * process whose interposer is ready the probe records nothing. */
#define MT_COOKIE_INTERPOSED (1ull << 24)
/* Bit 25: a free-like entry point of glibc's shared libc. A call to it from
 * libc's own code by `call rel32` to its entry, not through libc's PLT, is
 * the runtime releasing what it holds (glibc 2.36: an exiting thread's
 * tcache, tcache_thread_shutdown; and realloc(p, 0), an inner call anyway):
 * not a free of the program's, and no interposer sees it. The bits above
 * place such a call (alloc.bpf.c, runtime_release):
 *   bits 26..31 the probe's distance from the function's entry, in bytes
 *   bits 32..47 pages of libc's code below the entry's page
 *   bits 48..63 pages of libc's code from the entry's page on */
#define MT_COOKIE_RUNTIME_FREE (1ull << 25)
#define MT_COOKIE_RUNTIME_FREE_OF(probe_delta, pages_below, pages_from)                     \
  (MT_COOKIE_RUNTIME_FREE | ((__u64)(probe_delta) << 26) | ((__u64)(pages_below) << 32) | \
   ((__u64)(pages_from) << 48))
#define MT_RUNTIME_FREE_MAX_DELTA 0x3fu
#define MT_RUNTIME_FREE_MAX_PAGES 0xffffu
#define MT_COOKIE_PROBE_DELTA(c) ((__u64)(((c) >> 26) & MT_RUNTIME_FREE_MAX_DELTA))
#define MT_COOKIE_CODE_PAGES_BELOW(c) ((__u64)(((c) >> 32) & MT_RUNTIME_FREE_MAX_PAGES))
#define MT_COOKIE_CODE_PAGES_FROM(c) ((__u64)((c) >> 48))
#define MT_COOKIE_KIND(c) ((__u32)((c) & 0xff))
#define MT_COOKIE_SIZE_ARG(c) ((__u32)(((c) >> 8) & 0xf))
#define MT_COOKIE_COUNT_ARG(c) ((__u32)(((c) >> 12) & 0xf))
#define MT_COOKIE_PTR_ARG(c) ((__u32)(((c) >> 16) & 0xf))
#define MT_COOKIE_OUT_ARG(c) ((__u32)(((c) >> 20) & 0xf))

/* Counters the BPF side keeps in .bss; the recorder copies them into the
 * artifact trailer under the same names. */
struct mt_kernel_counters {
  __u64 events_lost;          /* allocator ring full */
  __u64 process_events_lost;  /* process ring full */
  __u64 attach_requests_lost; /* attach request could not be queued */
  __u64 pauses;               /* producers stopped for back-pressure */
  __u64 nested_skipped;       /* inner allocator calls folded into the outer one */
  __u64 runtime_frees;        /* glibc's own frees of what it holds (MT_COOKIE_RUNTIME_FREE): not recorded */
  __u64 handlers_nested_too_deep; /* signal handlers run without their own allocator state */
  __u64 stops_refused;        /* SIGSTOP refused by the kernel: the task ran on (and is not resumed) */
  /* Stack capture. */
  __u64 stacks_captured;      /* allocations whose stack was copied */
  __u64 stack_copy_failed;    /* nothing of the stack could be read */
  __u64 walks_complete;
  __u64 walks_truncated;
  __u64 walks_frame_limit;
  __u64 walks_no_module;
  __u64 walks_no_rule;
  __u64 walks_unsupported;
  __u64 walks_bad_frame;
  __u64 stack_definitions;    /* definitions emitted */
  __u64 stack_definitions_lost; /* stack ring full: the allocation carries no stack */
  __u64 stack_scratch_busy;   /* per-CPU scratch in use (preempted capture): no stack */
  /* Exceptions thrown inside a probed allocation call (bad_alloc): the
   * recorder puts the call's return address back before the unwinder runs. */
  __u64 unwind_restores_requested;
  __u64 unwind_restores_lost; /* process ring full: the program may abort */
  __u64 stack_live_reads;     /* words a walk read from the live stack, past the copy */
  __u64 stack_rewalks;        /* paths walked again at the return, once their rules were learned */
  /* Memory over time. */
  __u64 rss_changes;          /* RSS counter changes of tracked processes */
  __u64 rss_changes_by_owner; /* ... attributed through mm->owner (not the current task's) */
  __u64 rss_unattributed;     /* changes of an address space without owner task (exiting) */
  __u64 rss_records;          /* Rss records emitted (after coalescing) */
  __u64 memory_records_lost;  /* event ring full: an Rss or mapping record was lost */
  __u64 map_calls;            /* mmap/munmap/mremap/brk of tracked processes */
  __u64 map_calls_in_allocator; /* ... made by a probed allocator (counted by its allocation) */
};

#endif
