/* The contract between memtrack's three parts: the records they pass, the
 * memory they share, the numbers they agree on. src/wire/ is the bottom
 * layer: plain C headers that include nothing of memtrack's but each other,
 * compiled into the BPF programs (clang -target bpf), the interposer (C) and
 * the recorder (C++). This header: the records on the BPF rings.
 *
 *   kernel: bpf/                     interposer: src/interpose/ (LD_PRELOAD)
 *     | event ring    mt_alloc_event,   | its thread's chunk of the shm file
 *     |               mt_memory_event   |  (shared_memory.h): mt_alloc_event
 *     | process ring  mt_process_event  | its chunk's definition ring of the
 *     | stack ring    mt_stack_header   |  stacks file (stack_table.h):
 *     | per-CPU map   mt_kernel_counters|  mt_stack_header; shm headers'
 *     |  (counters.h)                   |  counters (counters.h)
 *     v                                 v
 *   recorder: src/record/ (ring_poller, shm_events, shm_stacks, bpf_session)
 *     | BPF maps: mt_module_table, mt_rule_key -> mt_unwind_rule
 *     |  (unwind_rule.h); probe cookies (probe_cookie.h, allocators.h)
 *     | stacks file: the same modules and rules; shm file: a decision per pid
 *     v
 *   kernel and interposer (their walkers, their probes and wrappers)
 *
 * Records are fixed-size structs of __u8..__u64 fields, naturally aligned,
 * no pointers: the same bytes in BPF, C and C++ (x86-64 only).
 *
 * Versioning: the BPF programs are compiled into the recorder's skeleton and
 * ship in one binary with it, so the rings and maps carry no version: a
 * change here changes both sides at once. The interposer is a library of its
 * own, loaded into processes the recorder did not build: the two shm files
 * start with a magic and a version (MT_SHM_VERSION, MT_STACKS_VERSION) that
 * the interposer checks before it uses them (otherwise it records nothing and
 * the uprobes do). Any change to their layout, or to a struct they hold
 * (mt_alloc_event, mt_stack_header, mt_module_table, mt_unwind_rule), bumps
 * that version.
 *
 * Writers of these records: the kernel and the interposer; reader: the
 * recorder, which maps each kind to EventType (record/intake/wire_events.cpp,
 * record/intake/ring_poller.cpp). */
#ifndef MEMTRACK_WIRE_EVENTS_H
#define MEMTRACK_WIRE_EVENTS_H

#include "types.h"

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
  __u64 timestamp; /* bpf_ktime_get_ns: CLOCK_MONOTONIC (the interposer's: the shared header's clock) */
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
  /* The interposer's Python frames and code definitions (python.h), after
   * the frame-pointer chain; 0 from the kernel. */
  __u32 py_frames;
  __u32 py_codes;
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

#endif
