/* Memory over time: each tracked process's RSS counters (coalesced here, so
 * a page-touching program does not emit a record per page) and the memory it
 * maps itself, outside the probed allocators. */
#include "state.bpf.h"
#include "wire/shared_memory.h"

#define NR_MMAP 9
#define NR_MUNMAP 11
#define NR_BRK 12
#define NR_MREMAP 25
#define MAP_ANONYMOUS 0x20
#define PAGE_MASK_4K 4095ull

/* A CPU's per-CPU area offset, learned from a per-CPU map of our own: its
 * value for that CPU lies at the map's per-CPU pointer plus the offset.
 * (Neither __per_cpu_offset nor this_cpu_off can be named: this kernel's
 * kallsyms lists no data symbols, so typed and untyped ksyms of variables
 * fail to load.) */
#define MAP_HEAD_BYTES 512
static __u8 counters_map_head[MAP_HEAD_BYTES];
static __u64 counters_base; /* the counters map's per-CPU pointer, once read */

/* The verifier allows no arithmetic on a map pointer: the map's head is
 * read whole, and the per-CPU pointer taken from the copy. */
static __always_inline __u64 counters_per_cpu_pointer(void) {
  if (counters_base) return counters_base;
  __u64 at = bpf_core_field_offset(struct bpf_array, pptrs);
  at &= MAP_HEAD_BYTES - sizeof(__u64); /* 8-aligned and in bounds, for the verifier */
  if (bpf_probe_read_kernel(counters_map_head, MAP_HEAD_BYTES, &counters)) return 0;
  counters_base = *(__u64*)(counters_map_head + at);
  return counters_base;
}

/* A pointer's value as a number (the verifier allows no arithmetic between
 * a map value pointer and a number): copied out of the stack slot. */
static __always_inline __u64 address_of(void* pointer) {
  void* volatile slot = pointer;
  __u64 address = 0;
  bpf_probe_read_kernel(&address, sizeof(address), (void*)&slot);
  return address;
}

static __always_inline __u64 per_cpu_offset(__u64 base, __u32 cpu) {
  __u32 zero = 0;
  void* value = bpf_map_lookup_percpu_elem(&counters, &zero, cpu);
  return value ? address_of(value) - base : 0;
}

/* The coalescing state of one process's counter. */
struct rss_key {
  __u32 tgid;
  __u32 member;
};
/* memtrack's own resident bytes are recorded in steps this big (and at exit). */
#define OWN_STEP_BYTES (64 * 1024)

/* Per process and counter. The values are the program's: the counter less
 * the pages memtrack's interposer faulted in (`own`). Under MT_OWN_MAPPED,
 * `own` is the bytes of the interposer's own anonymous mappings. */
struct rss_state {
  __u64 emitted;      /* the last value recorded */
  __u64 high;         /* the highest value recorded */
  __u64 last;         /* the value after the previous change */
  __u64 last_time;
  __u64 emit_time;
  __u64 mm;           /* the address space they are of: an exec starts another */
  __u64 counter;      /* the kernel counter's value at the previous change */
  __u64 own;          /* memtrack's bytes in the counter */
  __u64 own_emitted;  /* the last `own` recorded */
};

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, 65536);
  __type(key, struct rss_key);
  __type(value, struct rss_state);
} rss_states SEC(".maps");

/* The program break each address space had after its last brk, so a brk
 * outside the allocators is recorded as a move from the previous break. */
struct brk_seen {
  __u64 start_brk; /* tells a reused mm_struct address from the one seen */
  __u64 brk;
};
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, __u64); /* mm_struct address */
  __type(value, struct brk_seen);
} brk_seens SEC(".maps");

const volatile __u64 rss_step_bytes = 256 * 1024; /* record a change of this much at once */
const volatile __u64 rss_interval_ns = 10000000;  /* else at most once per interval */
const volatile __u32 nr_cpus = 1;                 /* possible CPUs (per-CPU counter parts) */
#define MAX_CPUS_SUMMED 128

static __always_inline void emit_memory(__u32 kind, __u32 tgid, __u64 time, __u64 addr, __u64 size,
                                        __u64 old_addr, __u64 old_size, __u32 member) {
  struct mt_memory_event e = {
      .timestamp = time,
      .pid = tgid,
      .tid = (__u32)bpf_get_current_pid_tgid(),
      .addr = addr,
      .size = size,
      .old_addr = old_addr,
      .old_size = old_size,
      .kind = kind,
      .member = member,
  };
  if (bpf_ringbuf_output(&events, &e, sizeof(e), BPF_RB_NO_WAKEUP)) {
    struct mt_kernel_counters* c = kernel_counters();
    if (c) c->memory_records_lost++;
  }
}

/* The head of a chunk of the interposer's shared memory, up to own_work. */
struct chunk_head {
  __u32 state, pid, tid, waiting;
  __u64 claimed_ns;
  __u32 depth, own_work;
};
_Static_assert(__builtin_offsetof(struct mt_shm_chunk, tid) == __builtin_offsetof(struct chunk_head, tid), "tid");
_Static_assert(__builtin_offsetof(struct mt_shm_chunk, depth) == __builtin_offsetof(struct chunk_head, depth), "depth");
_Static_assert(__builtin_offsetof(struct mt_shm_chunk, own_work) == __builtin_offsetof(struct chunk_head, own_work),
               "own_work");

/* In a process whose interposer records: the head of the current thread's
 * chunk, found by tid in the shared memory (written when the thread claimed
 * it, so it is in this process's page tables); an entry left by a dead
 * thread names a chunk with another tid. False when there is none. */
static __always_inline bool interposed_thread_chunk(__u32 tgid, __u32 tid, struct chunk_head* head) {
  __u64* shm = bpf_map_lookup_elem(&interposed_pids, &tgid);
  if (!shm || !*shm || tid >= MT_SHM_MAX_PIDS) return false;
  __u16 slot = 0;
  if (bpf_probe_read_user(&slot, sizeof(slot), (void*)(*shm + MT_SHM_THREADS_OFFSET + (__u64)tid * 2)) || slot == 0 ||
      slot > MT_SHM_CHUNKS)
    return false;
  __u64 chunk = *shm + MT_SHM_CHUNKS_OFFSET + (__u64)(slot - 1) * sizeof(struct mt_shm_chunk);
  if (bpf_probe_read_user(head, sizeof(*head), (void*)chunk)) return false;
  return head->tid == tid && head->pid == tgid;
}

/* The interposer's glibc probes are gone, so the thread state below says
 * nothing: the thread is inside one of the interposer's wrappers, i.e. in
 * glibc's allocator, when its chunk's depth is not 0. */
static __always_inline bool inside_interposed_call(__u32 tgid, __u32 tid) {
  struct chunk_head head = {};
  return interposed_thread_chunk(tgid, tid, &head) && head.depth != 0;
}

/* The interposer is writing memtrack's own memory (events, call paths). */
static __always_inline bool inside_own_work(__u32 tgid, __u32 tid) {
  struct chunk_head head = {};
  return interposed_thread_chunk(tgid, tid, &head) && head.own_work != 0;
}

/* The counter's exact value: the shared count plus every CPU's unfolded part
 * (the kernel folds a CPU's part only beyond a batch of 32+ pages, so the
 * shared count alone may be off by that much per CPU). */
static __always_inline __s64 counter_pages(struct percpu_counter* counter) {
  __s64 pages = BPF_CORE_READ(counter, count);
  if (nr_cpus > MAX_CPUS_SUMMED) return pages;
  __u64 parts = (__u64)BPF_CORE_READ(counter, counters), base = counters_per_cpu_pointer();
  if (!base) return pages;
  for (__u32 cpu = 0; cpu < MAX_CPUS_SUMMED && cpu < nr_cpus; cpu++) {
    __u64 offset = per_cpu_offset(base, cpu);
    if (!offset) break;
    __s32 part = 0;
    if (bpf_probe_read_kernel(&part, sizeof(part), (void*)(parts + offset)) == 0) pages += part;
  }
  return pages;
}

/* The process an address space belongs to: the current task's when it is
 * the one changing its own memory (page faults, munmap), else the mm's owner
 * (reclaim, khugepaged, another process's process_vm_writev). */
static __always_inline __u32 owner_tgid(struct mm_struct* mm, bool* by_owner) {
  struct task_struct* task = bpf_get_current_task_btf();
  *by_owner = false;
  if (task->mm == mm) return task->tgid;
  struct task_struct* owner = BPF_CORE_READ(mm, owner);
  if (!owner) return 0;
  *by_owner = true;
  return BPF_CORE_READ(owner, tgid);
}

/* Coalescing: a value is recorded when it moved by a step from the last one
 * recorded, or when it changed and the interval has passed since then. A
 * value about to be left by a fall is recorded when it is the highest yet,
 * so every new maximum is kept with its time (the last value of a run is
 * kept by the same rule once its process exits: the teardown falls). */
static __always_inline int rss_changed(struct mm_struct* mm, int member, bool counter_argument, long count) {
  if (recording_ended || member < 0 || member >= MT_RSS_MEMBERS) return 0;
  bool by_owner;
  __u32 tgid = owner_tgid(mm, &by_owner);
  if (!tgid) {
    struct mt_kernel_counters* c = kernel_counters();
    if (c) c->rss_unattributed++;
    return 0;
  }
  if (!is_tracked(tgid)) return 0;
  struct mt_kernel_counters* c = kernel_counters();
  if (c) {
    c->rss_changes++;
    if (by_owner) c->rss_changes_by_owner++;
  }
  __s64 pages = counter_argument ? count : counter_pages(&mm->rss_stat[member]);
  __u64 counter = pages > 0 ? (__u64)pages * 4096 : 0;
  __u64 now = bpf_ktime_get_ns();
  struct rss_key key = {.tgid = tgid, .member = member};
  struct rss_state* st = bpf_map_lookup_elem(&rss_states, &key);
  if (st && st->mm != (__u64)mm) {
    /* After an exec: memtrack's pages went with the old image. */
    st->mm = (__u64)mm;
    st->own = st->own_emitted = 0;
    st->counter = counter;
  }
  if (!st) {
    struct rss_state fresh = {.emitted = counter, .high = counter, .last = counter, .last_time = now,
                              .emit_time = now, .mm = (__u64)mm, .counter = counter};
    bpf_map_update_elem(&rss_states, &key, &fresh, BPF_NOEXIST);
    emit_memory(MT_RSS, tgid, now, 0, counter, 0, 0, member);
    if (c) c->rss_records++;
    return 0;
  }
  /* A rise while the interposer writes its own memory is memtrack's: its
   * events and call paths (shared memory) and caches (anonymous) are not the
   * program's. (Its code pages are file pages, like any library's.) */
  if (counter > st->counter && (member == MT_RSS_ANON || member == MT_RSS_SHMEM) && !by_owner &&
      inside_own_work(tgid, (__u32)bpf_get_current_pid_tgid())) {
    st->own += counter - st->counter;
    if (st->own - st->own_emitted >= OWN_STEP_BYTES) {
      emit_memory(MT_OWN_MEMORY, tgid, now, 0, st->own, 0, 0, member);
      st->own_emitted = st->own;
    }
  }
  st->counter = counter;
  __u64 value = counter > st->own ? counter - st->own : 0;
  if (value < st->last && st->last > st->high) {
    emit_memory(MT_RSS, tgid, st->last_time, 0, st->last, 0, 0, member);
    st->high = st->last;
    st->emitted = st->last;
    st->emit_time = st->last_time;
    if (c) c->rss_records++;
  }
  st->last = value;
  st->last_time = now;
  __u64 moved = value > st->emitted ? value - st->emitted : st->emitted - value;
  if (moved >= rss_step_bytes || (moved && now - st->emit_time >= rss_interval_ns)) {
    emit_memory(MT_RSS, tgid, now, 0, value, 0, 0, member);
    st->emitted = value;
    st->emit_time = now;
    if (value > st->high) st->high = value;
    if (c) c->rss_records++;
  }
  return 0;
}

/* Linux >= 6.2: per-CPU counters, summed here. */
SEC("tp_btf/rss_stat")
int BPF_PROG(on_rss_stat, struct mm_struct* mm, int member) { return rss_changed(mm, member, false, 0); }

/* Linux < 6.2: atomic counters, whose value (in pages) the tracepoint passes.
 * The recorder loads the one of the two this kernel's tracepoint matches
 * (record/kernel_features.h). */
SEC("tp_btf/rss_stat")
int BPF_PROG(on_rss_stat_count, struct mm_struct* mm, int member, long count) {
  return rss_changed(mm, member, true, count);
}

/* A free's heap trim follows it within microseconds; 10 ms leaves room for
 * a large trim's own cost while a direct sbrk made later counts. */
#define TRIM_WINDOW_NS 10000000

/* True when this mapping call of the current thread comes from a probed or
 * interposed allocator, whose allocation already counts the memory: a call
 * inside an allocation function (malloc serving a large block with mmap, realloc with
 * mremap, sbrk growing the heap), or, since free probes are entry-only, a
 * call made by free: glibc's free unmaps a large block (the freed block lies
 * in the unmapped range) or trims the heap below a block just freed. */
static __always_inline bool from_allocator(__u64 start, __u64 end, bool trim, __u64 now) {
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  if (inside_interposed_call(pid_tgid >> 32, (__u32)pid_tgid)) return true;
  struct thread_state* st = bpf_task_storage_get(&thread_states, bpf_get_current_task_btf(), 0, 0);
  if (!st) return false;
  if (inside_outer_call(st)) return true;
  if (!st->last_free_ptr || st->last_free_ptr < start || st->last_free_ptr >= end) return false;
  return !trim || now - st->last_free_time < TRIM_WINDOW_NS;
}

/* An anonymous mapping the interposer made for itself: memtrack's memory.
 * It unmaps none before its process ends or execs. */
static __always_inline void own_mapping(__u32 tgid, __u64 now, __u64 len) {
  struct mm_struct* mm = BPF_CORE_READ(bpf_get_current_task_btf(), mm); /* see on_memory_fork */
  struct rss_key key = {.tgid = tgid, .member = MT_OWN_MAPPED};
  struct rss_state* st = bpf_map_lookup_elem(&rss_states, &key);
  if (!st || st->mm != (__u64)mm) {
    struct rss_state fresh = {.mm = (__u64)mm};
    bpf_map_update_elem(&rss_states, &key, &fresh, BPF_ANY);
    st = bpf_map_lookup_elem(&rss_states, &key);
    if (!st) return;
  }
  st->own += len;
  st->own_emitted = st->own;
  emit_memory(MT_OWN_MEMORY, tgid, now, 0, st->own, 0, 0, MT_OWN_MAPPED);
}

/* Anonymous mappings and program break moves made outside the allocators,
 * seen at the syscall's return (the arguments are still in the registers). */
SEC("tp_btf/sys_exit")
int BPF_PROG(on_memory_syscall, struct pt_regs* regs, long ret) {
  long nr = regs->orig_ax;
  if (nr != NR_MMAP && nr != NR_MUNMAP && nr != NR_MREMAP && nr != NR_BRK) return 0;
  if (recording_ended) return 0;
  if (nr != NR_BRK && (unsigned long)ret >= (unsigned long)-4095) return 0; /* failed */
  if (nr == NR_MMAP && !(regs->r10 & MAP_ANONYMOUS)) return 0;
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  __u32 tgid = pid_tgid >> 32;
  if (!is_tracked(tgid)) return 0;
  struct mt_kernel_counters* c = kernel_counters();
  if (c) c->map_calls++;
  __u64 now = bpf_ktime_get_ns();
  if (nr == NR_BRK) {
    struct mm_struct* mm = BPF_CORE_READ(bpf_get_current_task_btf(), mm); /* see on_memory_fork */
    __u64 key = (__u64)mm, start_brk = BPF_CORE_READ(mm, start_brk), brk = BPF_CORE_READ(mm, brk);
    struct brk_seen* seen = bpf_map_lookup_elem(&brk_seens, &key);
    __u64 old = seen && seen->start_brk == start_brk ? seen->brk : start_brk;
    struct brk_seen now_seen = {.start_brk = start_brk, .brk = brk};
    bpf_map_update_elem(&brk_seens, &key, &now_seen, BPF_ANY);
    if (old == brk) return 0;
    if (from_allocator(brk < old ? start_brk : 0, brk < old ? old : 0, true, now)) {
      if (c) c->map_calls_in_allocator++;
      return 0;
    }
    emit_memory(MT_BRK, tgid, now, brk, 0, old, 0, 0);
    return 0;
  }
  __u64 addr = nr == NR_MMAP ? (__u64)ret : regs->di;
  __u64 len = (regs->si + PAGE_MASK_4K) & ~PAGE_MASK_4K;
  if (nr == NR_MMAP && (__s32)regs->r8 == MT_OWN_MAPPING_FD) {
    own_mapping(tgid, now, len);
    return 0;
  }
  if (from_allocator(addr, addr + len, false, now)) {
    if (c) c->map_calls_in_allocator++;
    return 0;
  }
  if (nr == NR_MMAP)
    emit_memory(MT_MMAP, tgid, now, addr, len, 0, 0, 0);
  else if (nr == NR_MUNMAP)
    emit_memory(MT_MUNMAP, tgid, now, addr, len, 0, 0, 0);
  else
    emit_memory(MT_MREMAP, tgid, now, (__u64)ret, (regs->dx + PAGE_MASK_4K) & ~PAGE_MASK_4K, addr, len, 0);
  return 0;
}

/* A forked child inherits its parent's private memory, memtrack's caches
 * included (their anonymous pages count in the child's RSS too, and their
 * mappings are the child's): its figures leave them out as the parent's do.
 * Shared pages are not inherited: the child faults in those it touches. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_memory_fork, struct task_struct* parent, struct task_struct* child) {
  __u32 child_tgid = child->tgid, parent_tgid = parent->tgid;
  if (child->pid != child_tgid || recording_ended || !is_tracked(parent_tgid)) return 0;
  __u64 now = bpf_ktime_get_ns();
  __u32 inherited_members[] = {MT_RSS_ANON, MT_OWN_MAPPED};
  for (__u32 i = 0; i < 2; i++) {
    __u32 member = inherited_members[i];
    struct rss_key key = {.tgid = parent_tgid, .member = member};
    struct rss_state* st = bpf_map_lookup_elem(&rss_states, &key);
    if (!st || !st->own) continue;
    /* Read, not loaded: the verifier looks a loaded pointer field up by
     * name among the kernel's ~100,000 types (is it trusted?), at each
     * path, which made this program's load 3 ms of the start. */
    struct rss_state inherited = {
        .mm = (__u64)BPF_CORE_READ(child, mm), .own = st->own, .own_emitted = st->own, .last_time = now};
    key.tgid = child_tgid;
    if (bpf_map_update_elem(&rss_states, &key, &inherited, BPF_ANY) == 0)
      emit_memory(MT_OWN_MEMORY, child_tgid, now, 0, inherited.own, 0, 0, member);
  }
  return 0;
}

/* A process's last RSS values that no record holds yet (a change below the
 * step within the interval) are recorded when it exits: its teardown is not
 * attributed to it any more. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_memory_exit, struct task_struct* task) {
  if (BPF_CORE_READ(task, signal, live.counter) != 0) return 0;
  __u32 tgid = task->tgid;
  for (__u32 member = 0; member <= MT_OWN_MAPPED; member++) {
    struct rss_key key = {.tgid = tgid, .member = member};
    struct rss_state* st = bpf_map_lookup_elem(&rss_states, &key);
    if (!st) continue;
    if (member < MT_RSS_MEMBERS && st->last != st->emitted && !recording_ended) {
      emit_memory(MT_RSS, tgid, st->last_time, 0, st->last, 0, 0, member);
      struct mt_kernel_counters* c = kernel_counters();
      if (c) c->rss_records++;
    }
    if (st->own != st->own_emitted && !recording_ended)
      emit_memory(MT_OWN_MEMORY, tgid, st->last_time, 0, st->own, 0, 0, member);
    bpf_map_delete_elem(&rss_states, &key);
  }
  return 0;
}
