/* State shared by the BPF programs: maps and configuration, defined once in
 * state.bpf.c and declared here for the other objects of the skeleton. */
#ifndef MEMTRACK_STATE_BPF_H
#define MEMTRACK_STATE_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "wire/counters.h"
#include "wire/events.h"
#include "wire/probe_cookie.h"
#include "wire/unwind_rule.h"

#define SIGSTOP 19
#define PROT_EXEC 0x4

/* A thread's outermost allocator call in progress, from its entry probe to
 * its return probe. */
struct outer_call {
  __u64 cookie;       /* its argument layout */
  __u64 size;
  __u64 old_ptr;
  __u64 out_ptr;
  __u64 outer_sp;     /* user sp at its entry */
  __u64 stack_hash;   /* its stack definition, 0: none */
  __u64 rewalk_pc;    /* walk the path again at the return, from this caller */
  __u32 depth;        /* probed allocator calls in progress */
  __u32 reserved;
};

/* The call a signal handler found (maybe none: depth 0), put back when the
 * handler returns. */
struct interrupted_call {
  struct outer_call call;
  __u64 resume_sp; /* the interrupted context's user sp, which rt_sigreturn restores */
};
/* Signal handlers running at once on a thread, each nested in the last. */
#define MT_MAX_HANDLERS 4

/* Per-thread allocator state, carried from entry to return probe. */
struct thread_state {
  struct outer_call call;
  __u32 emitted;      /* events this thread emitted (paces ring checks) */
  __u32 handlers;     /* entries of `interrupted` in use */
  __u64 stack_start;  /* the thread's stack mapping, once looked up */
  __u64 stack_end;    /* ... up to the argument area */
  /* The last block this thread freed, and where from: a wrapper such as
   * operator delete calling (or tail-calling) free must count once. */
  __u64 last_free_ptr;
  __u64 last_free_sp;
  __u64 last_free_ip;
  __u64 last_free_time;
  /* The handlers running (alloc.bpf.c, on_signal_deliver), innermost last. */
  struct interrupted_call interrupted[MT_MAX_HANDLERS];
};

/* state.bpf.c defines MT_DEFINE_STATE to turn these declarations into the
 * single definition of each map. */
#ifdef MT_DEFINE_STATE
#define MT_SHARED
#else
#define MT_SHARED extern
#endif

/* A file whose allocators are probed for a process (tgid 0: for every
 * process, when probes are attached globally). */
struct file_key {
  __u32 tgid;
  __u32 reserved;
  __u64 dev; /* kernel s_dev encoding: major << 20 | minor */
  __u64 ino;
};

MT_SHARED struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32);   /* tgid */
  __type(value, __u32); /* parent tgid */
} tracked_pids SEC(".maps");

/* Only the recorder adds files, so entries can be allocated as it does:
 * preallocated, the map took 1.5 MiB of kernel memory. (tracked_pids and
 * paused_pids stay preallocated: the kernel updates them on fork and under
 * back-pressure, where an allocation must not fail.) */
MT_SHARED struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, 16384);
  __type(key, struct file_key);
  __type(value, __u8);
} known_files SEC(".maps");

/* Processes whose interposer records their glibc allocator calls (set by
 * its ready probe, inherited at fork, dropped at exec and exit), and where
 * its shared memory is mapped in them (src/wire/shared_memory.h). */
MT_SHARED struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32);   /* tgid */
  __type(value, __u64); /* the shared memory's address */
} interposed_pids SEC(".maps");

MT_SHARED struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32);   /* tgid stopped for back-pressure */
  __type(value, __u64); /* when */
} paused_pids SEC(".maps");

MT_SHARED struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct thread_state);
} thread_states SEC(".maps");

MT_SHARED struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
} events SEC(".maps");

MT_SHARED struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
} process_events SEC(".maps");

/* Fills a process ring record's common fields; the kind's own are zero. */
static __always_inline void init_process_event(struct mt_process_event* e, __u32 kind, __u32 tgid, __u32 tid) {
  e->timestamp = bpf_ktime_get_ns();
  e->pid = tgid;
  e->tid = tid;
  e->kind = kind;
  e->parent_pid = 0;
  e->exit_code = 0;
  e->args_len = 0;
  e->flags = 0;
  e->reserved = 0;
  e->dev = 0;
  e->ino = 0;
  e->comm[0] = 0;
  e->path[0] = 0;
  e->args[0] = 0;
}

MT_SHARED struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct mt_kernel_counters);
} counters SEC(".maps");

/* Stack capture (sized to a minimum by the recorder when it is off). */
MT_SHARED struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
} stack_events SEC(".maps");

MT_SHARED struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, 16384);
  __type(key, __u32); /* tgid */
  __type(value, struct mt_module_table);
} module_tables SEC(".maps");

MT_SHARED struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, 1 << 20);
  __type(key, struct mt_rule_key);
  __type(value, struct mt_unwind_rule);
} unwind_rules SEC(".maps");

MT_SHARED struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 262144);
  __type(key, __u64);  /* stack hash */
  __type(value, __u8);
} seen_stacks SEC(".maps");

/* The stack copy of each CPU: one value per CPU (more than a per-CPU array
 * value may hold), indexed by CPU id. The page of slack lets a chunked copy
 * end anywhere below the budget. */
struct stack_copy {
  __u8 bytes[MT_MAX_STACK_BYTES + 4096];
};
MT_SHARED struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __type(key, __u32);
  __type(value, struct stack_copy);
} stack_copies SEC(".maps");

/* A walk's header and chain while it is built. */
struct stack_work {
  struct mt_stack_header header;
  __u64 chain[MT_MAX_FRAMES];
  __u64 fp_chain[MT_MAX_FP_FRAMES];
  __u64 copy_len; /* written and read back as memory: see copy_stack */
  __u64 unbound;  /* the same for the walk's variables: see start_walk */
  __u32 busy;
  __u32 reserved;
};
MT_SHARED struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct stack_work);
} stack_works SEC(".maps");

/* Configuration, frozen at load time. */
extern const volatile __u8 empty_probes;  /* benchmark floor: probes do nothing */
/* Probes are attached per tracked process (links filtered by pid), so other
 * processes do not pay for them; else globally, filtered in the programs. */
extern const volatile __u8 per_process_attach;
/* Whether a per-process link fires only in its process (uprobe_multi links
 * of kernels before 6.11 did not always: the programs then check). */
extern const volatile __u8 links_filter_process;
/* Per-process probes without bpf_send_signal_task (Linux < 6.13): a new child
 * stops itself at its first return to user space (process.bpf.c). */
extern const volatile __u8 child_stops_itself;
/* record --hold ptrace: the recorder's tracer holds new children at their
 * first stop, and turns the other SIGSTOPs into ptrace stops. */
extern const volatile __u8 ptrace_hold;
extern const volatile __u64 wakeup_bytes; /* wake the poller above this much data */
extern const volatile __u64 pause_bytes;  /* stop producers above this much data */
/* The same for the stack ring, whose records (up to ~40 KiB with a raw copy)
 * are far larger than events: the pause leaves room for one per CPU. */
extern const volatile __u64 stack_pause_bytes;
extern const volatile __u8 stack_mode;    /* enum mt_stack_mode */
extern const volatile __u32 stack_budget; /* bytes of stack to copy, <= MT_MAX_STACK_BYTES */
/* Bumped whenever a producer is paused, so user space notices without a syscall. */
extern volatile __u64 pause_generation;
/* Set by the recorder when it stops recording: from then on no task is
 * stopped and nothing is emitted, so no process is left waiting for it. */
extern volatile __u8 recording_ended;
/* Set by the recorder when the rule map is full: a miss then no longer stops
 * the process to learn (the rule could not be stored). */
extern volatile __u8 rules_full;

/* Each argument register is loaded with its own instruction: clang would
 * otherwise compute ctx + offset once, and the verifier rejects a load
 * through a modified context pointer. */
#define LOAD_CTX_FIELD(ctx, field)                                                  \
  ({                                                                                \
    __u64 __v;                                                                      \
    asm volatile("%0 = *(u64 *)(%1 + %2)"                                           \
                 : "=r"(__v)                                                        \
                 : "r"(ctx), "i"(__builtin_offsetof(struct pt_regs, field)));       \
    __v;                                                                            \
  })

static __always_inline bool is_tracked(__u32 tgid) {
  return bpf_map_lookup_elem(&tracked_pids, &tgid) != 0;
}

/* The uretprobe trampoline of the current process: while an outer probed call
 * is in progress, its return address slot holds this address. */
static __always_inline __u64 uretprobe_trampoline(void) {
  struct task_struct* task = bpf_get_current_task_btf();
  struct xol_area* area = BPF_CORE_READ(task, mm, uprobes_state.xol_area);
  return area ? BPF_CORE_READ(area, vaddr) : 0;
}

/* True when the outermost probed call recorded in `st` is still running, so a
 * probe hit now comes from inside it (operator new calling malloc, realloc
 * calling free). An outer call left by an exception or longjmp never returns
 * through its uretprobe; its slot no longer holds the trampoline. */
static __always_inline bool inside_outer_call(struct thread_state* st) {
  if (st->call.depth == 0) return false;
  __u64 slot = 0;
  if (bpf_probe_read_user(&slot, sizeof(slot), (void*)st->call.outer_sp) == 0 &&
      slot == uretprobe_trampoline())
    return true;
  st->call.depth = 0;
  return false;
}

/* A handler returned (rt_sigreturn restored the context whose user sp is
 * `sp`): the call it interrupted is in progress again. A handler left by a
 * longjmp never returns: its entry, deeper in the stack than the context
 * resumed, is dropped here. */
static __always_inline void handler_returned(__u64 sp) {
  struct thread_state* st = bpf_task_storage_get(&thread_states, bpf_get_current_task_btf(), 0, 0);
  if (!st) return;
  for (int i = 0; i < MT_MAX_HANDLERS; i++) {
    __u32 running = st->handlers;
    if (running == 0) return;
    struct interrupted_call* saved = &st->interrupted[(running - 1) & (MT_MAX_HANDLERS - 1)];
    if (saved->resume_sp > sp) return; /* a handler without an entry returned inside another */
    st->handlers = running - 1;
    if (saved->resume_sp == sp) {
      st->call = saved->call;
      return;
    }
  }
}

static __always_inline bool is_interposed(__u32 tgid) {
  return bpf_map_lookup_elem(&interposed_pids, &tgid) != 0;
}

static __always_inline struct mt_kernel_counters* kernel_counters(void) {
  __u32 zero = 0;
  return bpf_map_lookup_elem(&counters, &zero);
}

#define PF_EXITING 0x00000004

/* With --hold ptrace, the current task is stopped only while a live tracer
 * can catch the SIGSTOP: sent to a task its tracer is leaving (a killed
 * recorder), it would become a job-control stop its parent sees. */
static __always_inline bool may_stop_current(void) {
  if (!ptrace_hold) return true;
  struct task_struct* task = bpf_get_current_task_btf();
  return task->ptrace && !(BPF_CORE_READ(task, parent, flags) & PF_EXITING);
}

/* Stops the current process until the recorder resumes it. False when no
 * stop is in place (no tracer to catch it, or the kernel refused the signal:
 * counted): the recorder must then not resume it, since a SIGCONT with no
 * stop of its own would end a later stop made for another reason. */
static __always_inline bool stop_current(void) {
  if (!may_stop_current()) return false;
  if (bpf_send_signal(SIGSTOP) == 0) return true;
  struct mt_kernel_counters* c = kernel_counters();
  if (c) c->stops_refused++;
  return false;
}

/* Stop the producing process when a ring is nearly full; the recorder
 * resumes it once the ring has drained, so the default run loses nothing. */
static __always_inline void pause_producer(__u32 tgid, __u64 now) {
  if (recording_ended || bpf_map_lookup_elem(&paused_pids, &tgid)) return;
  /* Signal first, then record: the recorder's SIGCONT for this pause can
   * only come after it finds the record, so it never precedes the stop. */
  if (!stop_current()) return;
  bpf_map_update_elem(&paused_pids, &tgid, &now, BPF_ANY);
  __sync_fetch_and_add(&pause_generation, 1);
  struct mt_kernel_counters* c = kernel_counters();
  if (c) c->pauses++;
}

#endif
