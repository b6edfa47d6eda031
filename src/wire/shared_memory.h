/* The memory the interposer (src/interpose/interpose.c) shares with the
 * recorder (src/record/intake/shm_events.cpp): one file on /dev/shm, named to every
 * process of the recorded tree by MT_SHM_ENV. Created by the recorder, which
 * writes the header and the decisions; each interposer thread writes its
 * chunk's events and depth; the kernel reads a thread's chunk (depth,
 * own_work: bpf/memory.bpf.c). The events are events.h's struct
 * mt_alloc_event, so both paths produce the same records.
 *
 * Layout: the header at offset 0, a byte per pid at MT_SHM_DECISIONS_OFFSET,
 * each thread's chunk by tid at MT_SHM_THREADS_OFFSET (for the kernel: an
 * anonymous mmap of a thread whose chunk's depth is not 0 is glibc's, made
 * inside an allocator call), then MT_SHM_CHUNKS chunks. A thread claims the
 * first free chunk (FREE -> OWNED) for its events, so the chunks in use stay
 * at the front, below `chunks_used`; the chunk is a single-producer single-consumer ring: the thread
 * writes events[head % N] and publishes head (release), the recorder reads up
 * to head and publishes tail. */
#ifndef MEMTRACK_WIRE_SHARED_MEMORY_H
#define MEMTRACK_WIRE_SHARED_MEMORY_H

#include "events.h"

#define MT_SHM_MAGIC 0x3168737472746d6dULL /* "mmtrtsh1" */
#define MT_SHM_VERSION 6u
#define MT_SHM_ENV "MEMTRACK_SHM"       /* the file's path */
#define MT_SHM_CHUNK_EVENTS 32768u      /* a power of two: 1.75 MiB of events per thread */
#define MT_SHM_CHUNKS 512u              /* threads recording at once */
#define MT_SHM_MAX_PIDS (1u << 22)      /* the kernel's PID_MAX_LIMIT */
#define MT_SHM_DECISIONS_OFFSET 4096ull
/* The fd the interposer passes to its own anonymous mmaps (Linux ignores an
 * anonymous mapping's fd): the kernel tells them from the program's by it
 * and records them as memtrack's (bpf/memory.bpf.c, on_memory_syscall). */
#define MT_OWN_MAPPING_FD 0x6d746d6d /* "mmtm" */
/* __u16 per tid: 1 + the index of the chunk the thread claimed (0: none);
 * written at the claim, so a tid's entry may be a dead thread's: the kernel
 * checks the chunk's tid. */
#define MT_SHM_THREADS_OFFSET (MT_SHM_DECISIONS_OFFSET + MT_SHM_MAX_PIDS)
#define MT_SHM_CHUNKS_OFFSET (MT_SHM_THREADS_OFFSET + MT_SHM_MAX_PIDS * 2ull)

enum mt_chunk_state {
  MT_CHUNK_FREE = 0,
  MT_CHUNK_OWNED = 1,
  MT_CHUNK_RETIRED = 2, /* its thread exited: the recorder frees it once drained */
};

/* The recorder's word on a pid, written while the process is stopped at the
 * mapping of the interposer, before the interposer runs: MT_PATH_INTERPOSER
 * when its ready probe is attached (the kernel then ignores the process's
 * glibc allocator probes once the interposer says it is ready). */
enum mt_path_decision {
  MT_PATH_UPROBES = 0,
  MT_PATH_INTERPOSER = 1,
};

/* The clock of the interposers' timestamps, chosen by the recorder before
 * any process maps the file (interpose/event_time.h). */
enum mt_shm_clock {
  MT_CLOCK_MONOTONIC = 0, /* CLOCK_MONOTONIC ns */
  MT_CLOCK_TSC = 1,       /* TSC ticks: the recorder converts them (record/intake/tsc_clock.h) */
};

struct mt_shm_chunk {
  __u32 state; /* enum mt_chunk_state; claimed with a compare-and-swap */
  __u32 pid;
  __u32 tid;
  __u32 waiting;      /* the producer sleeps on `tail` (futex) for space */
  __u64 claimed_ns;   /* CLOCK_MONOTONIC, written last at a claim (0: claim in progress): chunks of an image an exec replaced are older */
  __u32 depth;        /* the producer's wrappers in progress (inner calls record nothing) */
  /* Not 0 while the producer writes memtrack's own memory (its events, call
   * paths and caches): the kernel counts the pages it faults in meanwhile as
   * memtrack's, not the program's (bpf/memory.bpf.c, rss_changed). */
  __u32 own_work;
  __u8 pad0[32];
  __u32 head;         /* events written; only the producer writes it */
  __u8 pad1[60];
  __u32 tail;         /* events consumed; only the recorder writes it */
  __u8 pad2[60];
  struct mt_alloc_event events[MT_SHM_CHUNK_EVENTS];
};

struct mt_shm_header {
  __u64 magic;
  __u32 version;
  __u32 recorder_pid;   /* producers stop waiting when it is gone */
  __u32 chunk_count;
  __u32 chunk_events;
  __u64 chunk_size;     /* sizeof(struct mt_shm_chunk) */
  __u32 ended;          /* recording ended: record nothing more, never wait */
  __u32 doorbell;       /* futex: bumped when a chunk is half full or full */
  __u32 chunks_used;    /* chunks below it were claimed at some time: the recorder drains those only */
  __u32 detached;       /* processes attached by `record --pid` whose GOT entries are back (wire/attach.h) */
  __u32 clock;          /* enum mt_shm_clock: the events' and definitions' timestamps */
  __u32 reserved;
  /* Counters, for the trailer (atomic adds). */
  __u64 full_waits;         /* a thread waited for the recorder to drain its chunk */
  __u64 chunk_waits;        /* a thread waited for a free chunk */
  __u64 arena_allocations;  /* served from the interposer's static arena while dlsym ran */
  __u64 arena_bytes;
  __u64 not_interposed;     /* interposer loaded but another allocator provides malloc */
  __u64 calls_at_ready_lost; /* calls of other threads in flight when the process became ready */
  __u64 address_limited;    /* left to the uprobes: an address-space limit (RLIMIT_AS) is set */
  /* A signal handler's calls made while it interrupted the write of an
   * event (the ring's next slot is taken): recorded as inner calls, nothing. */
  __u64 handler_allocations_dropped;
  __u64 handler_frees_dropped;
};

static inline struct mt_shm_chunk* mt_shm_chunk_at(void* base, __u32 index) {
  return (struct mt_shm_chunk*)((char*)base + MT_SHM_CHUNKS_OFFSET +
                                (unsigned long long)index * sizeof(struct mt_shm_chunk));
}

static inline unsigned long long mt_shm_size(void) {
  return MT_SHM_CHUNKS_OFFSET + (unsigned long long)MT_SHM_CHUNKS * sizeof(struct mt_shm_chunk);
}

#endif
