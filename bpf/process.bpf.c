/* Following the process tree (fork, exec, exit) and noticing executable
 * mappings of files whose allocators are not probed yet. */
#include "state.bpf.h"

/* Linux >= 6.13: signals another task (here: a new child, before it runs). */
extern int bpf_send_signal_task(struct task_struct* task, int sig, enum pid_type type, __u64 value) __ksym __weak;

/* Before 6.13 (child_stops_itself) a new child stops itself instead: its
 * first return to user space, from fork in its own context, passes the
 * sys_exit tracepoint, where it sends itself SIGSTOP and only then publishes
 * its Fork (so the recorder's SIGCONT cannot come first). Until then the
 * Fork waits here. */
struct pending_fork {
  __u32 parent_tgid;
  char comm[MT_COMM_LEN];
};
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 8192);
  __type(key, __u32);
  __type(value, struct pending_fork);
} pending_forks SEC(".maps");

static __always_inline struct mt_process_event* reserve_process_event(__u32 kind, __u32 tgid, __u32 tid) {
  if (recording_ended) return 0;
  struct mt_process_event* e = bpf_ringbuf_reserve(&process_events, sizeof(*e), 0);
  if (!e) {
    struct mt_kernel_counters* c = kernel_counters();
    if (c) {
      if (kind == MT_ATTACH_REQUEST)
        c->attach_requests_lost++;
      else
        c->process_events_lost++;
    }
    return 0;
  }
  init_process_event(e, kind, tgid, tid);
  return e;
}

/* Asks the recorder to probe the allocators of a file a tracked task just
 * mapped executable, and stops the task until it has: even the first
 * allocation through that file is then recorded. The recorder scans all of
 * the task's executable mappings, so one request covers the interpreter and
 * libraries execve mapped with the program. */
static __always_inline void request_attach(struct file* file, __u64 pid_tgid, __u32 flags) {
  struct inode* inode = BPF_CORE_READ(file, f_inode);
  struct file_key key = {
      .tgid = per_process_attach ? pid_tgid >> 32 : 0,
      .dev = BPF_CORE_READ(inode, i_sb, s_dev),
      .ino = BPF_CORE_READ(inode, i_ino),
  };
  if (!(flags & MT_REQUEST_RENEW)) {
    if (bpf_map_lookup_elem(&known_files, &key)) return;
    /* Files without allocators are known for every process. */
    key.tgid = 0;
    if (bpf_map_lookup_elem(&known_files, &key)) return;
  }
  struct mt_process_event* e = reserve_process_event(MT_ATTACH_REQUEST, pid_tgid >> 32, (__u32)pid_tgid);
  if (!e) return; /* counted; the task runs on unstopped rather than hang */
  e->flags = flags;
  e->dev = key.dev;
  e->ino = key.ino;
  bpf_probe_read_kernel_str(e->path, sizeof(e->path), BPF_CORE_READ(file, f_path.dentry, d_name.name));
  /* Stop, then publish: the recorder's SIGCONT must not come first. */
  if (may_stop_current()) bpf_send_signal(SIGSTOP);
  bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

/* Publishes a Fork deferred to the child's first return (or its exit). */
static __always_inline void publish_pending_fork(__u32 tgid, bool stop) {
  struct pending_fork* pending = bpf_map_lookup_elem(&pending_forks, &tgid);
  if (!pending) return;
  struct mt_process_event* e = reserve_process_event(MT_FORK, tgid, tgid);
  if (e) {
    e->parent_pid = pending->parent_tgid;
    __builtin_memcpy(e->comm, pending->comm, sizeof(e->comm));
  }
  bpf_map_delete_elem(&pending_forks, &tgid);
  if (!e) return; /* counted; the child runs on unstopped rather than hang */
  if (stop) bpf_send_signal(SIGSTOP);
  bpf_ringbuf_submit(e, 0);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct* parent, struct task_struct* child) {
  __u32 child_tgid = child->tgid;
  if (child->pid != child_tgid) return 0; /* a new thread, not a process */
  __u32 parent_tgid = parent->tgid;
  if (!is_tracked(parent_tgid)) return 0;
  bpf_map_update_elem(&tracked_pids, &child_tgid, &parent_tgid, BPF_ANY);
  /* The child runs a copy of the parent's ready interposer. */
  __u64* interposed = bpf_map_lookup_elem(&interposed_pids, &parent_tgid);
  if (interposed) bpf_map_update_elem(&interposed_pids, &child_tgid, interposed, BPF_ANY);
  if (per_process_attach && !ptrace_hold && child_stops_itself) {
    struct pending_fork pending = {.parent_tgid = parent_tgid};
    bpf_probe_read_kernel_str(pending.comm, sizeof(pending.comm), child->comm);
    if (bpf_map_update_elem(&pending_forks, &child_tgid, &pending, BPF_ANY) == 0) return 0;
    /* Full: published now, the child unstopped (counted as a lost stop). */
    struct mt_kernel_counters* c = kernel_counters();
    if (c) c->process_events_lost++;
  }
  struct mt_process_event* e = reserve_process_event(MT_FORK, child_tgid, child->pid);
  if (!e) return 0;
  e->parent_pid = parent_tgid;
  bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), child->comm);
  /* With per-process probes the child has none yet: it stops before its
   * first instruction and the recorder, seeing the Fork, attaches them (and
   * resumes it: hence the stop comes before the record). A ptrace tracer
   * holds it at its first stop instead, without a signal pending. */
  if (per_process_attach && !ptrace_hold && !child_stops_itself && bpf_send_signal_task)
    bpf_send_signal_task(child, SIGSTOP, PIDTYPE_TGID, 0);
  bpf_ringbuf_submit(e, 0);
  return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct* task, pid_t old_pid, struct linux_binprm* bprm) {
  __u32 tgid = task->tgid;
  if (!is_tracked(tgid)) return 0;
  struct mt_process_event* e = reserve_process_event(MT_EXEC, tgid, task->pid);
  if (!e) return 0;
  bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), task->comm);
  bpf_probe_read_kernel_str(e->path, sizeof(e->path), BPF_CORE_READ(bprm, filename));
  struct mm_struct* mm = BPF_CORE_READ(task, mm); /* read, not loaded: see memory.bpf.c, on_memory_fork */
  __u64 start = BPF_CORE_READ(mm, arg_start), end = BPF_CORE_READ(mm, arg_end);
  __u64 len = end > start ? end - start : 0;
  if (len > MT_ARGS_LEN) len = MT_ARGS_LEN;
  /* The task is current, so its new argv can be read from user memory. */
  if (len > 0 && bpf_probe_read_user(e->args, ((len - 1) & (MT_ARGS_LEN - 1)) + 1, (void*)start) == 0)
    e->args_len = len;
  bpf_ringbuf_submit(e, 0);
  /* execve mapped the program and its interpreter itself, without mmap(2). */
  bool leader_changed = per_process_attach && old_pid != (pid_t)tgid;
  /* The new image has no interposer until its own is ready; its glibc probes,
   * left out while the old one recorded, must be made anew. */
  bool was_interposed = bpf_map_delete_elem(&interposed_pids, &tgid) == 0;
  request_attach(BPF_CORE_READ(bprm, file), bpf_get_current_pid_tgid(),
                 leader_changed || was_interposed ? MT_REQUEST_RENEW : 0);
  return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct* task) {
  if (BPF_CORE_READ(task, signal, live.counter) != 0) return 0; /* other threads live on */
  __u32 tgid = task->tgid;
  if (!is_tracked(tgid)) return 0;
  /* A child that never returned to user space still has its Fork here. */
  if (child_stops_itself) publish_pending_fork(tgid, false);
  /* Reserve before forgetting the process: if its Exit cannot be reported,
   * it stays tracked (the recorder cleans up at the end) rather than leave
   * its probes and known files behind unseen. */
  struct mt_process_event* e = reserve_process_event(MT_EXIT, tgid, task->pid);
  if (!e) return 0;
  /* Only the task that removes the group reports it. */
  if (bpf_map_delete_elem(&tracked_pids, &tgid) != 0) {
    bpf_ringbuf_discard(e, 0);
    return 0;
  }
  bpf_map_delete_elem(&paused_pids, &tgid);
  bpf_map_delete_elem(&interposed_pids, &tgid);
  e->exit_code = task->exit_code;
  bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), task->comm);
  bpf_ringbuf_submit(e, 0);
  return 0;
}

#define NR_MMAP 9
#define NR_CLONE 56
#define NR_FORK 57
#define NR_VFORK 58
#define NR_CLONE3 435

/* Executable mappings made by mmap(2), e.g. by the dynamic loader for a
 * library or dlopen. (fentry on the LSM hook would see every mapping but is
 * not permitted on every kernel; raw syscall tracepoints are.) */
SEC("tp_btf/sys_exit")
int BPF_PROG(on_syscall_exit, struct pt_regs* regs, long ret) {
  /* Every syscall of every process passes here: direct loads, no helpers,
   * until it is known to be an executable mmap. */
  if (regs->orig_ax != NR_MMAP) {
    /* rt_sigreturn: restoring the registers set orig_ax to -1. */
    if (regs->orig_ax == -1) handler_returned(regs->sp);
    /* A new child's first return to user space (see pending_forks). */
    if (child_stops_itself && ret == 0 &&
        (regs->orig_ax == NR_CLONE || regs->orig_ax == NR_FORK || regs->orig_ax == NR_VFORK ||
         regs->orig_ax == NR_CLONE3)) {
      __u64 pid_tgid = bpf_get_current_pid_tgid();
      if ((__u32)pid_tgid == pid_tgid >> 32) publish_pending_fork(pid_tgid >> 32, true);
    }
    return 0;
  }
  if ((unsigned long)ret >= (unsigned long)-4095) return 0; /* failed */
  if (!(regs->dx & PROT_EXEC)) return 0;
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  if (!is_tracked(pid_tgid >> 32)) return 0;
  long fd = (long)regs->r8;
  struct task_struct* task = bpf_get_current_task_btf();
  struct fdtable* fdt = BPF_CORE_READ(task, files, fdt);
  if (fd < 0 || fd >= BPF_CORE_READ(fdt, max_fds)) return 0;
  struct file** fds = BPF_CORE_READ(fdt, fd);
  struct file* file = 0;
  bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]);
  if (file) request_attach(file, pid_tgid, 0);
  return 0;
}
