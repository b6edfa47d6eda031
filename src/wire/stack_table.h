/* The memory through which the interposer walks its own stack with the rules
 * the kernel's walker uses (call paths on the fast path): a second file on
 * /dev/shm, named to the processes by MT_STACKS_ENV, created and filled by the
 * recorder (src/record/intake/shm_stacks.cpp) as it fills the BPF maps, walked by
 * src/interpose/stack_walk.c. The structs it holds are the kernel's: the
 * module tables, rule keys and rules of its walker (unwind_rule.h), and the
 * stack definitions of its stack ring (events.h).
 *
 * Layout: the header at offset 0; MT_STACKS_RULE_SLOTS rule slots (open
 * addressing, linear probing, written by the recorder alone: a slot is
 * published by its file_id_plus_one, never changed after); the process slots
 * (a module table per process, by pid, under a sequence count); a file's
 * prepared rules (every return address of the file, given at once) as a
 * region of its own, found through a directory by file id; then one
 * definition ring per interposer chunk (shared_memory.h): the chunk's thread
 * writes its stack definitions there, the recorder drains them.
 *
 * Why regions: the file is sparse, and a page touched first costs a fault
 * (~20-40 us on a VM) in the recorder and again in every process reading it.
 * Hashed over the whole table, a file's rules touched nearly every page of
 * it; a region holds them sorted, 16 bytes each, after an index of where each
 * 4 KiB page of the file's offsets starts among them: a lookup binary-searches
 * one page's rules, near those of the previous frame in the same code.
 * Learned rules (misses), and rules the regions have no room for, go to the
 * hashed slots. */
#ifndef MEMTRACK_WIRE_STACK_TABLE_H
#define MEMTRACK_WIRE_STACK_TABLE_H

#include "counters.h"
#include "events.h"
#include "unwind_rule.h"

#define MT_STACKS_MAGIC 0x3173636b7473746dULL /* "mtstcks1" */
#define MT_STACKS_VERSION 5u
#define MT_STACKS_ENV "MEMTRACK_SHM_STACKS"
#define MT_STACKS_RULE_SLOTS (1u << 21)   /* twice the kernel's rule map */
#define MT_STACKS_RULE_PROBES 64u         /* a rule is at most this far from its home slot */
#define MT_STACKS_PROCESS_SLOTS 1024u     /* processes recorded at once */
#define MT_STACKS_PID_GONE 0xffffffffu    /* a process slot freed (probing goes on past it) */
#define MT_STACKS_RING_BYTES (128u << 10) /* a power of two: > the largest definition */
#define MT_STACKS_FILES 65536u            /* files with a region: file ids below this */
#define MT_STACKS_REGION_BYTES (64ull << 20) /* sparse: room for ~4 M prepared rules */

struct mt_stacks_header {
  __u64 magic;
  __u32 version;
  __u32 stack_budget; /* bytes of raw stack kept when a walk cannot finish */
  /* Counters, for the trailer (atomic adds by the interposers). */
  MT_WALK_COUNTERS(MT_COUNTER_FIELD)
  __u64 definitions;
  __u64 ring_waits;      /* a thread waited for room in its definition ring */
  __u64 definitions_lost; /* recording ended while waiting: the allocation has no stack */
  __u64 seen_set_full;   /* a path defined again for want of room in its process's set */
  __u64 table_changed;   /* the module table changed during a walk: the walk went raw */
  __u64 rewalks;         /* walks made again once the recorder learned a missing rule */
  __u64 walks_repeated;  /* walks that were the thread's last one from the site, checked word by word */
  __u64 walks_joined;    /* walks that joined a kept walk part way, checked from there */
  /* Python (interpose/python_frames.c): processes whose frames are read,
   * refused for their version or for a layout that did not check, run with
   * pymalloc (PYTHONMALLOC not malloc); stacks cut at MT_MAX_PYTHON_FRAMES;
   * code objects defined, or not for want of room in the definition. */
  __u64 python_processes;
  __u64 python_refused_version;
  __u64 python_refused_layout;
  __u64 python_pymalloc;
  __u64 python_frames_cut;
  __u64 python_codes;
  __u64 python_codes_deferred;
};

struct mt_rule_slot {
  __u32 file_id_plus_one; /* 0: empty; stored last (release) */
  __u32 reserved;
  __u64 file_offset;
  struct mt_unwind_rule rule;
  __u32 pad;
};

/* A file's region of prepared rules: published by `count` (release), never
 * changed after. At `index` (a byte offset among the regions): pages + 1
 * __u32, how many of its rules lie before each page of file offsets from
 * `base` on; then the rules, by file offset. */
struct mt_file_rules {
  __u32 count; /* 0: none (yet) */
  __u32 pages;
  __u64 base; /* a multiple of 4096 */
  __u64 index;
  __u64 reserved;
};

struct mt_region_rule {
  __u32 file_offset;
  struct mt_unwind_rule rule;
};

static inline struct mt_region_rule* mt_region_rules(__u32* index, __u32 pages) {
  return (struct mt_region_rule*)(index + ((pages + 2) & ~1u));
}

struct mt_process_slot {
  __u32 pid;      /* 0: never used; MT_STACKS_PID_GONE: freed */
  __u32 sequence; /* odd while the recorder rewrites the table */
  struct mt_module_table table;
};

/* Records are 8-aligned: a __u32 length (of the record after this word, 0: the
 * rest of the ring is padding), a __u32 pad, then struct mt_stack_header, the
 * chain, the raw copy and nothing of the frame-pointer walk (fp_frames 0).
 * `head` and `tail` count bytes ever written and consumed. */
struct mt_stack_ring {
  __u64 head;           /* only the producer writes it */
  __u8 pad0[56];
  __u64 tail;           /* only the recorder writes it */
  __u8 pad1[56];
  /* The producer's own: its thread's stack bounds, for the claim they were
   * found for (the chunk's claimed_ns). */
  __u64 bounds_claim;
  __u64 stack_low;
  __u64 stack_high;
  __u8 pad2[40];
  __u8 bytes[MT_STACKS_RING_BYTES];
};

static inline __u64 mt_stacks_rule_home(__u32 file_id, __u64 file_offset) {
  __u64 h = (file_offset ^ ((__u64)file_id << 40)) * 0x9e3779b97f4a7c15ULL;
  return (h >> 40) & (MT_STACKS_RULE_SLOTS - 1);
}

static inline __u64 mt_stacks_process_home(__u32 pid) {
  return ((__u64)pid * 0x9e3779b97f4a7c15ULL >> 32) & (MT_STACKS_PROCESS_SLOTS - 1);
}

#define MT_STACKS_RULES_OFFSET 4096ull
#define MT_STACKS_PROCESSES_OFFSET \
  (MT_STACKS_RULES_OFFSET + (unsigned long long)MT_STACKS_RULE_SLOTS * sizeof(struct mt_rule_slot))
#define MT_STACKS_FILES_OFFSET                                                                              \
  ((MT_STACKS_PROCESSES_OFFSET + (unsigned long long)MT_STACKS_PROCESS_SLOTS * sizeof(struct mt_process_slot) + \
    4095) & ~4095ull)
#define MT_STACKS_REGIONS_OFFSET \
  (MT_STACKS_FILES_OFFSET + (unsigned long long)MT_STACKS_FILES * sizeof(struct mt_file_rules))
#define MT_STACKS_RINGS_OFFSET (MT_STACKS_REGIONS_OFFSET + MT_STACKS_REGION_BYTES)

static inline struct mt_rule_slot* mt_stacks_rules(void* base) {
  return (struct mt_rule_slot*)((char*)base + MT_STACKS_RULES_OFFSET);
}

static inline struct mt_process_slot* mt_stacks_processes(void* base) {
  return (struct mt_process_slot*)((char*)base + MT_STACKS_PROCESSES_OFFSET);
}

static inline struct mt_file_rules* mt_stacks_files(void* base) {
  return (struct mt_file_rules*)((char*)base + MT_STACKS_FILES_OFFSET);
}

static inline __u32* mt_stacks_region_index(void* base, const struct mt_file_rules* file) {
  return (__u32*)((char*)base + MT_STACKS_REGIONS_OFFSET + file->index);
}

static inline struct mt_stack_ring* mt_stacks_ring(void* base, __u32 chunk_index) {
  return (struct mt_stack_ring*)((char*)base + MT_STACKS_RINGS_OFFSET +
                                 (unsigned long long)chunk_index * sizeof(struct mt_stack_ring));
}

static inline unsigned long long mt_stacks_size(unsigned chunks) {
  return MT_STACKS_RINGS_OFFSET + (unsigned long long)chunks * sizeof(struct mt_stack_ring);
}

#endif
