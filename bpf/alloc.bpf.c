/* Allocator probes. One entry/return pair serves every allocation function
 * and one entry probe every free-like function: the attach cookie describes
 * where the function keeps its arguments (wire/probe_cookie.h, MT_COOKIE). */
#include "stack.bpf.h"

static __always_inline __u64 arg_at(struct pt_regs* ctx, __u32 index) {
  switch (index) {
    case 0: return LOAD_CTX_FIELD(ctx, di);
    case 1: return LOAD_CTX_FIELD(ctx, si);
    case 2: return LOAD_CTX_FIELD(ctx, dx);
    case 3: return LOAD_CTX_FIELD(ctx, cx);
    case 4: return LOAD_CTX_FIELD(ctx, r8);
    default: return 0;
  }
}

/* The calling thread's state, or NULL when its process is not tracked. A
 * thread gets state on its first probed call once its process is tracked, so
 * on the hot path one lookup answers both questions (every helper call costs
 * tens of ns with this machine's SRSO mitigation). */
static __always_inline struct thread_state* tracked_thread_state(void) {
  if (recording_ended) return 0;
  struct task_struct* task = bpf_get_current_task_btf();
  /* Per-process links fire only in tracked processes. */
  if (per_process_attach && links_filter_process)
    return bpf_task_storage_get(&thread_states, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
  struct thread_state* st = bpf_task_storage_get(&thread_states, task, 0, 0);
  if (st) return st;
  if (!is_tracked(task->tgid)) return 0;
  return bpf_task_storage_get(&thread_states, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
}

/* How often a thread checks the ring's fill level: every check is a helper
 * call, and a wake-up or pause a few dozen events late costs nothing. */
#define FILL_CHECK_EVERY 64

static __always_inline void emit(struct thread_state* st, __u32 kind, __u64 addr, __u64 size, __u64 old_addr,
                                 __u64 now) {
  struct task_struct* task = bpf_get_current_task_btf();
  struct mt_alloc_event e = {
      .timestamp = now,
      .pid = task->tgid,
      .tid = task->pid,
      .addr = addr,
      .size = size,
      .old_addr = old_addr,
      .stack_hash = kind == MT_FREE ? 0 : st->call.stack_hash,
      .kind = kind,
  };
  /* The poller drains on a timer; it is woken (~3 us per wake-up) only when
   * a batch has accumulated. */
  __u64 flags = BPF_RB_NO_WAKEUP, queued = 0;
  bool check = (++st->emitted % FILL_CHECK_EVERY) == 0;
  if (check) {
    queued = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
    if (queued >= wakeup_bytes) flags = BPF_RB_FORCE_WAKEUP;
  }
  if (bpf_ringbuf_output(&events, &e, sizeof(e), flags)) {
    struct mt_kernel_counters* c = kernel_counters();
    if (c) c->events_lost++;
    pause_producer(e.pid, now);
  } else if (check && queued >= pause_bytes) {
    pause_producer(e.pid, now);
  }
}

/* A wrapper's free follows its own within microseconds (each probe hit costs
 * about one), from a frame at most a few hundred bytes deeper. */
#define WRAPPER_WINDOW_NS 50000
#define WRAPPER_MAX_FRAME 512

static __always_inline void count_nested(void) {
  struct mt_kernel_counters* c = kernel_counters();
  if (c) c->nested_skipped++;
}

/* An allocation function's entry. Returns 0 when its return must be seen
 * (the outermost call, whose result is the block), 1 otherwise. `stacks` is
 * a compile-time constant: false in the programs loaded with --no-stacks,
 * whose verification then skips the stack walker (docs/benchmarks-history.md, "A
 * cheaper start"). */
static __always_inline int on_alloc_entry(struct pt_regs* ctx, struct thread_state* st, __u64 cookie,
                                          bool session, bool stacks) {
  if (inside_outer_call(st)) {
    /* A return probe fires for this inner call unless a session skips it. */
    if (!session) st->call.depth++;
    count_nested();
    return 1;
  }
  __u32 size_arg = MT_COOKIE_SIZE_ARG(cookie), count_arg = MT_COOKIE_COUNT_ARG(cookie);
  __u32 ptr_arg = MT_COOKIE_PTR_ARG(cookie), out_arg = MT_COOKIE_OUT_ARG(cookie);
  __u64 size = size_arg == MT_ARG_NONE ? 0 : arg_at(ctx, size_arg);
  if (count_arg != MT_ARG_NONE) size *= arg_at(ctx, count_arg);
  st->call.cookie = cookie;
  st->call.size = size;
  st->call.old_ptr = ptr_arg == MT_ARG_NONE ? 0 : arg_at(ctx, ptr_arg);
  st->call.out_ptr = out_arg == MT_ARG_NONE ? 0 : arg_at(ctx, out_arg);
  st->call.outer_sp = PT_REGS_SP(ctx);
  st->call.depth = 1;
  st->call.stack_hash = stacks && stack_mode != MT_STACKS_OFF ? capture_stack(ctx, st) : 0;
  return 0;
}

/* A glibc entry point the process's interposer records (src/interpose/).
 * Allocations are decided at their return, as the interposer does, so a call
 * in flight when the interposer becomes ready is recorded once. */
static __always_inline bool left_to_interposer(__u64 cookie) {
  return (cookie & MT_COOKIE_INTERPOSED) && is_interposed(bpf_get_current_pid_tgid() >> 32);
}

static __always_inline void on_alloc_return(struct pt_regs* ctx, struct thread_state* st, bool stacks) {
  if (st->call.depth == 0) return;
  if (--st->call.depth != 0) return; /* an inner call returned */
  if (left_to_interposer(st->call.cookie)) return;
  if (stacks && st->call.rewalk_pc) {
    rewalk_stack(ctx, st);
    st->call.rewalk_pc = 0;
  }
  __u64 cookie = st->call.cookie;
  __u32 kind = MT_COOKIE_KIND(cookie);
  __u64 ret = PT_REGS_RC(ctx);
  __u64 addr = ret;
  if (MT_COOKIE_OUT_ARG(cookie) != MT_ARG_NONE) { /* posix_memalign */
    if ((int)ret != 0) return;
    addr = 0;
    bpf_probe_read_user(&addr, sizeof(addr), (void*)st->call.out_ptr);
  }
  st->last_free_ptr = 0;
  if (addr == 0) {
    /* realloc(p, 0) returning NULL has freed p (glibc); any other NULL is a
     * failed call and records nothing. */
    if (kind == MT_REALLOC && st->call.size == 0 && st->call.old_ptr != 0) emit(st, MT_FREE, st->call.old_ptr, 0, 0, bpf_ktime_get_ns());
    return;
  }
  emit(st, kind, addr, st->call.size, kind == MT_REALLOC ? st->call.old_ptr : 0, bpf_ktime_get_ns());
}

#define CALL_REL32 0xe8
#define CALL_REL32_LEN 5
#define PAGE_SHIFT_BITS 12

/* glibc freeing what it holds itself (wire/probe_cookie.h, MT_COOKIE_RUNTIME_FREE): the
 * return address lies in libc's code, after a `call rel32` to the probed
 * function's entry. The program's frees come from outside libc or through
 * libc's PLT, so only the few frees made from libc's code read its bytes. */
static __always_inline bool runtime_release(struct pt_regs* ctx, __u64 cookie) {
  if (!(cookie & MT_COOKIE_RUNTIME_FREE)) return false;
  __u64 entry = PT_REGS_IP(ctx) - MT_COOKIE_PROBE_DELTA(cookie), ret = 0;
  __u64 entry_page = entry >> PAGE_SHIFT_BITS;
  /* The probe sits where %rsp is as at the entry (probe_placement.h). */
  if (bpf_probe_read_user(&ret, sizeof(ret), (void*)PT_REGS_SP(ctx))) return false;
  __u64 code_start = (entry_page - MT_COOKIE_CODE_PAGES_BELOW(cookie)) << PAGE_SHIFT_BITS;
  __u64 code_end = (entry_page + MT_COOKIE_CODE_PAGES_FROM(cookie)) << PAGE_SHIFT_BITS;
  if (ret < code_start + CALL_REL32_LEN || ret > code_end) return false;
  __u8 call[CALL_REL32_LEN];
  if (bpf_probe_read_user(call, sizeof(call), (void*)(ret - CALL_REL32_LEN))) return false;
  __s32 displacement;
  __builtin_memcpy(&displacement, &call[1], sizeof(displacement));
  return call[0] == CALL_REL32 && ret + (__s64)displacement == entry;
}

static __always_inline void on_free(struct pt_regs* ctx, struct thread_state* st, __u64 cookie) {
  __u64 ptr = arg_at(ctx, MT_COOKIE_PTR_ARG(cookie));
  if (ptr == 0 || left_to_interposer(cookie)) return;
  if (inside_outer_call(st)) { /* e.g. realloc implemented with free */
    count_nested();
    return;
  }
  /* Blocks the program freed already, or never got from malloc (a thread's
   * tcache itself): the interposer sees none of them either. */
  if (runtime_release(ctx, cookie)) {
    struct mt_kernel_counters* c = kernel_counters();
    if (c) c->runtime_frees++;
    return;
  }
  /* A wrapper (operator delete -> free) frees the same block again at once,
   * from a little deeper in the stack, or from the same frame when it
   * tail-calls (the probed function differs then). A block freed, recycled
   * by another thread and freed again is a new free: it comes later. */
  __u64 sp = PT_REGS_SP(ctx), ip = PT_REGS_IP(ctx), now = bpf_ktime_get_ns();
  if (ptr == st->last_free_ptr && now - st->last_free_time < WRAPPER_WINDOW_NS &&
      ((sp < st->last_free_sp && st->last_free_sp - sp <= WRAPPER_MAX_FRAME) ||
       (sp == st->last_free_sp && ip != st->last_free_ip))) {
    count_nested();
    return;
  }
  st->last_free_ptr = ptr;
  st->last_free_sp = sp;
  st->last_free_ip = ip;
  st->last_free_time = now;
  emit(st, MT_FREE, ptr, 0, 0, now);
}

/* A C++ exception begins (__cxa_allocate_exception) or unwinding starts
 * (_Unwind_RaiseException and friends), at entry. A uretprobe trampoline on
 * the stack now means the exception was thrown inside a probed allocation
 * call (bad_alloc from jemalloc's or tcmalloc's operator new): with sessions
 * only the outermost call is return-probed, and nothing else can be on the
 * stack while it runs. The trampoline has no unwind information, so the
 * unwinder would give up and the program abort. The kernel's return
 * instances keep the original addresses; BPF may not write user memory
 * under lockdown, so the thread stops and the recorder puts them back. The
 * failed call records nothing; allocations made from now on (the
 * exception's own) are outermost calls; the kernel drops the stale return
 * instances itself. Only an allocator that catches its own exception and
 * returns anyway (a nothrow operator new whose new-handler throws) loses its
 * return: it returns NULL then, which records nothing either. */
static __always_inline void on_unwind(struct pt_regs* ctx, struct thread_state* st) {
  st->call.depth = 0;
  __u64 trampoline = uretprobe_trampoline(), sp = PT_REGS_SP(ctx);
  if (recording_ended || !trampoline) return;
  struct mt_process_event* e = bpf_ringbuf_reserve(&process_events, sizeof(*e), 0);
  struct mt_kernel_counters* c = kernel_counters();
  if (!e) {
    if (c) c->unwind_restores_lost++;
    return;
  }
  /* Newest first (classic uprobes also hijack inner calls' returns). An
   * instance below the stack pointer was left by a longjmp: not a frame. */
  struct return_instance* ri = BPF_CORE_READ(bpf_get_current_task_btf(), utask, return_instances);
  __u32 count = 0;
  for (int i = 0; i < MT_MAX_RESTORES && ri; i++) {
    __u64 address = BPF_CORE_READ(ri, stack), slot = 0;
    if (address >= sp && bpf_probe_read_user(&slot, sizeof(slot), (void*)address) == 0 && slot == trampoline) {
      struct mt_return_slot* out = &e->restore.slots[count & (MT_MAX_RESTORES - 1)];
      out->address = address;
      out->expected = trampoline;
      out->original = BPF_CORE_READ(ri, orig_ret_vaddr);
      count++;
    }
    ri = BPF_CORE_READ(ri, next);
  }
  if (count == 0) { /* no probed call in progress: the usual case */
    bpf_ringbuf_discard(e, 0);
    return;
  }
  struct task_struct* task = bpf_get_current_task_btf();
  init_process_event(e, MT_RESTORE_RETURNS, task->tgid, task->pid);
  e->restore.count = count;
  e->restore.reserved = 0;
  /* Stop, then publish: the recorder's SIGCONT must not come first. */
  if (stop_current()) e->flags = MT_RECORD_STOPPED;
  bpf_ringbuf_submit(e, 0);
  if (c) c->unwind_restores_requested++;
}

/* A signal handler is about to run: its allocator calls are calls of their
 * own, not inner calls of the one it may interrupt (whose return probe has
 * not fired yet, or whose uretprobe trampoline is running: either way the
 * thread's state is kept as it is). The state is put aside and the handler
 * starts with none; handler_returned (state.bpf.h) puts it back at
 * rt_sigreturn. Handlers nested deeper than MT_MAX_HANDLERS run with the
 * state as it is: their calls inside an allocator call fold into it
 * (counted). */
SEC("tp_btf/signal_deliver")
int BPF_PROG(on_signal_deliver, int sig, struct kernel_siginfo* info, struct k_sigaction* action) {
  if (recording_ended || !action || (unsigned long)action->sa.sa_handler <= 1) return 0; /* SIG_DFL, SIG_IGN */
  struct task_struct* task = bpf_get_current_task_btf();
  struct thread_state* st = bpf_task_storage_get(&thread_states, task, 0, 0);
  if (!st) return 0;
  __u64 sp = PT_REGS_SP((struct pt_regs*)bpf_task_pt_regs(task));
  /* Entries deeper in the stack than the interrupted context: their handlers
   * left by longjmp. */
  __u32 running = st->handlers;
  for (int i = 0; i < MT_MAX_HANDLERS; i++) {
    if (running == 0 || st->interrupted[(running - 1) & (MT_MAX_HANDLERS - 1)].resume_sp >= sp) break;
    running--;
  }
  if (running >= MT_MAX_HANDLERS) {
    st->handlers = running;
    struct mt_kernel_counters* c = kernel_counters();
    if (c) c->handlers_nested_too_deep++;
    return 0;
  }
  /* Masked for the verifier: the compiler knows running < MT_MAX_HANDLERS
   * and would drop the mask. */
  __u32 index = running;
  barrier_var(index);
  struct interrupted_call* saved = &st->interrupted[index & (MT_MAX_HANDLERS - 1)];
  saved->call = st->call;
  saved->resume_sp = sp;
  st->handlers = running + 1;
  st->call.depth = 0;
  st->call.rewalk_pc = 0;
  return 0;
}

/* The interposer of a process is ready (memtrack_interposer_ready, probed in
 * every process, once per recording): from now on it records the process's
 * glibc allocator calls and the probes above leave them. */
SEC("uprobe")
int BPF_KPROBE(interposer_ready) {
  if (recording_ended) return 0;
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  __u32 tgid = pid_tgid >> 32;
  if (!is_tracked(tgid)) return 0;
  __u64 shm = PT_REGS_PARM1(ctx);
  bpf_map_update_elem(&interposed_pids, &tgid, &shm, BPF_ANY);
  struct mt_process_event* e = bpf_ringbuf_reserve(&process_events, sizeof(*e), 0);
  if (!e) {
    struct mt_kernel_counters* c = kernel_counters();
    if (c) c->process_events_lost++;
    return 0;
  }
  init_process_event(e, MT_INTERPOSED, tgid, (__u32)pid_tgid);
  bpf_ringbuf_submit(e, 0);
  return 0;
}

/* Linux >= 6.13: one uprobe session link per file and process runs this at
 * every allocator entry and, when the entry asks for it, at the return.
 * Functions probed at entry only (the free family, the unwinder) have a
 * uprobe_multi link of their own (entry_only below): a session link made for
 * another process (another recording) wants the return of every call into
 * its function that its task filter turns away, and the kernel then puts the
 * trampoline at the return of this process's _Unwind_RaiseException, where
 * the unwinder starts. */
extern bool bpf_session_is_return(void) __ksym __weak;

static __always_inline int on_session(struct pt_regs* ctx, bool stacks) {
  /* The floor still takes the return probe. */
  if (empty_probes) return 0;
  if (bpf_session_is_return()) {
    struct thread_state* st = bpf_task_storage_get(&thread_states, bpf_get_current_task_btf(), 0, 0);
    if (st) on_alloc_return(ctx, st, stacks);
    return 0;
  }
  struct thread_state* st = tracked_thread_state();
  if (!st) return 1;
  return on_alloc_entry(ctx, st, bpf_get_attach_cookie(ctx), true, stacks);
}

/* The recorder loads one of the two: with call paths or without (--no-stacks). */
SEC("uprobe")
int BPF_KPROBE(allocator_session) { return on_session(ctx, false); }

SEC("uprobe")
int BPF_KPROBE(allocator_session_stacks) { return on_session(ctx, true); }

/* The same for classic uprobes (one per function and direction), the
 * fallback for kernels without uprobe sessions. */
SEC("uprobe")
int BPF_KPROBE(alloc_enter) {
  if (empty_probes) return 0;
  struct thread_state* st = tracked_thread_state();
  if (st) on_alloc_entry(ctx, st, bpf_get_attach_cookie(ctx), false, true);
  return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(alloc_exit) {
  if (empty_probes) return 0;
  /* Only calls whose entry was recorded have state with depth > 0. */
  struct thread_state* st = bpf_task_storage_get(&thread_states, bpf_get_current_task_btf(), 0, 0);
  if (st) on_alloc_return(ctx, st, true);
  return 0;
}

/* Functions probed at entry only: the free family and the unwinder. */
SEC("uprobe")
int BPF_KPROBE(entry_only) {
  if (empty_probes) return 0;
  struct thread_state* st = tracked_thread_state();
  if (!st) return 0;
  __u64 cookie = bpf_get_attach_cookie(ctx);
  if (MT_COOKIE_KIND(cookie) == MT_UNWIND)
    on_unwind(ctx, st);
  else
    on_free(ctx, st, cookie);
  return 0;
}
