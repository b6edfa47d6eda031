/* Stack capture at an allocation's entry: copy the user stack once, walk the
 * copy with unwind rules (user space derives them from each module's CFI and
 * learns the missing ones from the definitions that stop at a miss), hash the
 * return-address chain and emit one definition per distinct chain. Frames
 * beyond the copy are walked by reading only the words the walk needs from
 * the live stack, so no copy budget cuts a path short. When the walk cannot
 * finish, the definition carries the raw copy and registers for an offline
 * DWARF unwinder. Neither the copy nor a live read reaches the main thread's
 * argument and environment area. Included by alloc.bpf.c. */
#ifndef MEMTRACK_STACK_BPF_H
#define MEMTRACK_STACK_BPF_H

#include "state.bpf.h"

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x00000100000001b3ULL
#define PAGE_SIZE 4096
/* Word reads: offsets are below MT_MAX_STACK_BYTES (a power of two) and
 * 8-aligned, so this mask keeps them unchanged and in bounds. */
#define COPY_WORD_MASK ((MT_MAX_STACK_BYTES - 1) & ~7ULL)

static __always_inline __u64 fnv_word(__u64 hash, __u64 word) { return (hash ^ word) * FNV_PRIME; }

struct vma_bounds {
  __u64 start;
  __u64 end;
};

static long record_vma_bounds(struct task_struct* task, struct vm_area_struct* vma, void* data) {
  ((struct vma_bounds*)data)->start = vma->vm_start;
  ((struct vma_bounds*)data)->end = vma->vm_end;
  return 0;
}

/* Where the kernel put argc, the argv and envp arrays, auxv and the argument
 * and environment strings at exec (create_elf_tables: argc at start_stack,
 * everything else above it, the strings from arg_start to env_end): the
 * lowest of these above sp, or ~0 when none is (thread stacks, which lie
 * elsewhere). Nothing at or above it is ever copied or read: it holds the
 * environment's secrets, not frames (_start's frame is below start_stack). */
static __always_inline __u64 argument_area_start(struct task_struct* task, __u64 sp) {
  struct mm_struct* mm = BPF_CORE_READ(task, mm);
  __u64 bounds[3] = {BPF_CORE_READ(mm, start_stack), BPF_CORE_READ(mm, arg_start), BPF_CORE_READ(mm, env_start)};
  __u64 lowest = ~0ULL;
  for (int i = 0; i < 3; i++)
    if (bounds[i] > sp && bounds[i] < lowest) lowest = bounds[i];
  return lowest;
}

/* The end of sp's stack mapping or the start of the argument area, whichever
 * comes first; 0 when unknown. A thread's stack mapping does not move (the
 * main thread's grows down, its end stays): it is looked up once per thread
 * (bpf_find_vma only try-locks the mm, and fails while another thread maps
 * memory), and stack_end keeps the limit. */
static __always_inline __u64 stack_limit(struct thread_state* st, struct task_struct* task, __u64 sp) {
  if (sp < st->stack_start || sp >= st->stack_end) {
    struct vma_bounds vma = {};
    if (bpf_find_vma(task, sp, record_vma_bounds, &vma, 0) == 0 && vma.end > sp) {
      __u64 arguments = argument_area_start(task, sp);
      st->stack_start = vma.start;
      st->stack_end = arguments < vma.end ? arguments : vma.end;
    }
  }
  if (sp >= st->stack_start && sp < st->stack_end) return st->stack_end;
  __u64 arguments = argument_area_start(task, sp);
  return arguments == ~0ULL ? 0 : arguments;
}

/* Copies [sp, min(sp + budget, stack limit)) into `copy`. One read serves
 * when every page is present; otherwise pages are copied one by one up to
 * the first that is not (which is also where the stack ends when its limit
 * is unknown). Returns the bytes copied; `*limit` is the stack limit. */
static __always_inline __u64 copy_stack(struct stack_copy* copy, struct stack_work* work, struct thread_state* st,
                                        struct task_struct* task, __u64 sp, __u64* limit) {
  __u64 end = stack_limit(st, task, sp);
  *limit = end;
  bool known_end = end != 0;
  __u64 len = stack_budget;
  if (known_end && end - sp < len) len = end - sp;
  work->header.truncated = known_end && end - sp > stack_budget;
  len = ((len - 1) & (MT_MAX_STACK_BYTES - 1)) + 1; /* 1..MT_MAX_STACK_BYTES, for the verifier */
  if (bpf_probe_read_user(copy->bytes, len, (void*)sp) != 0) {
    __u64 got = 0;
    for (int i = 0; i < MT_MAX_STACK_BYTES / PAGE_SIZE + 1; i++) {
      if (got >= len) break;
      __u64 chunk = PAGE_SIZE - ((sp + got) & (PAGE_SIZE - 1));
      if (chunk > len - got) chunk = len - got;
      chunk = ((chunk - 1) & (PAGE_SIZE - 1)) + 1;
      __u64 offset = got & (MT_MAX_STACK_BYTES - 1);
      if (bpf_probe_read_user(copy->bytes + offset, chunk, (void*)(sp + got)) != 0) break;
      got += chunk;
    }
    /* Stopped at a hole rather than at the budget: not truncated. */
    work->header.truncated = got == len && len == stack_budget && !known_end;
    len = got;
  } else if (!known_end) {
    work->header.truncated = len == stack_budget;
  }
  /* Launder the length through memory: the verifier then sees one bounded
   * value instead of one precise value per way out of the loop above. */
  work->copy_len = len;
  return *(volatile __u64*)&work->copy_len;
}

struct walk {
  struct stack_work* work;
  struct stack_copy* copy;
  struct mt_module_table* modules;
  __u64 sp;    /* where the copy starts */
  __u64 len;   /* bytes copied */
  __u64 limit; /* live reads stay below: the stack's end or argument area; 0: none */
  __u64 cfa;   /* the current frame's stack pointer after its return */
  __u64 rbp;
  __u64 pc;    /* the current frame's return address */
  __u64 hash;
  __u32 frames;
  __u32 end;
  __u32 live_reads; /* words read from the live stack, past the copy */
};

/* A value as the verifier sees one read from memory: any value, no link to
 * where it came from. */
static __always_inline __u64 unbound(struct stack_work* work, __u64 value) {
  work->unbound = value;
  return *(volatile __u64*)&work->unbound;
}

/* The walk's variables, made unbound before the loop: the verifier then
 * enters walk_frame with one state whatever way the caller came (the copy's
 * length, the stack's limit), and verifies it a few times instead of once
 * per way and round (a start of 0.34 s with call paths). */
static __always_inline void start_walk(struct walk* w) {
  struct stack_work* work = w->work;
  w->sp = unbound(work, w->sp);
  w->len = unbound(work, w->len);
  w->limit = unbound(work, w->limit);
  w->cfa = unbound(work, w->cfa);
  w->rbp = unbound(work, w->rbp);
  w->pc = unbound(work, w->pc);
  w->hash = unbound(work, w->hash);
  w->frames = unbound(work, 0);
  w->end = unbound(work, w->end);
  w->live_reads = unbound(work, 0);
}

static __always_inline bool read_copied_word(struct walk* w, __u64 address, __u64* out) {
  if (address < w->sp) return false;
  __u64 offset = address - w->sp;
  if (offset + 8 > w->len || (offset & 7)) return false;
  *out = *(__u64*)(w->copy->bytes + (offset & COPY_WORD_MASK));
  return true;
}

/* A word of the frame being unwound: from the copy, or past it from the live
 * stack (the caller's frames do not change while the thread is in the probe). */
static __always_inline bool read_stack_word(struct walk* w, __u64 address, __u64* out) {
  if (read_copied_word(w, address, out)) return true;
  if (address < w->sp + w->len || (address & 7) || address + 8 > w->limit) return false;
  if (bpf_probe_read_user(out, sizeof(*out), (void*)address) != 0) return false;
  w->live_reads++;
  return true;
}

/* The index of the module holding `address`, or -1. A global function: the
 * verifier checks it once, on its own, rather than its binary search again
 * with every state of each walk that calls it (docs/benchmarks-history.md,
 * "Call paths on the fast path, cheaper"). */
__noinline int find_module_index(struct mt_module_table* table, __u64 address) {
  if (!table) return -1;
  __u32 lo = 0, hi = table->count;
  if (hi > MT_MAX_MODULES) hi = MT_MAX_MODULES;
  for (int i = 0; i < 9; i++) { /* log2(MT_MAX_MODULES) + 1 */
    if (lo >= hi) break;
    __u32 mid = (lo + hi) / 2;
    struct mt_module* m = &table->modules[mid & (MT_MAX_MODULES - 1)];
    if (address < m->start)
      hi = mid;
    else if (address >= m->end)
      lo = mid + 1;
    else
      return mid;
  }
  return -1;
}

static __always_inline struct mt_module* find_module(struct mt_module_table* table, __u64 address) {
  int found = find_module_index(table, address);
  if (found < 0 || found >= MT_MAX_MODULES) return 0;
  return &table->modules[found];
}

static __always_inline long stop_walk(struct walk* w, __u32 end, bool miss) {
  w->end = end;
  if (miss) w->work->header.miss_pc = w->pc;
  return 1;
}

/* One frame: record the return address, then find the caller's frame.
 * Called MT_MAX_FRAMES + 1 times at most: the last round finds the frame
 * limit reached with a caller still to record. */
static long walk_frame(__u32 index, void* data) {
  struct walk* w = data;
  __u64 pc = w->pc;
  if (w->frames >= MT_MAX_FRAMES) return stop_walk(w, MT_END_FRAME_LIMIT, false);
  w->work->chain[w->frames & (MT_MAX_FRAMES - 1)] = pc;
  w->frames++;
  w->hash = fnv_word(w->hash, pc);

  /* A return address follows its call instruction: look up the call. */
  struct mt_module* module = find_module(w->modules, pc - 1);
  if (!module) return stop_walk(w, MT_END_NO_MODULE, true);
  struct mt_rule_key key = {.file_id = module->file_id, .file_offset = pc - module->start + module->file_offset};
  struct mt_unwind_rule* rule = bpf_map_lookup_elem(&unwind_rules, &key);
  if (!rule) return stop_walk(w, MT_END_NO_RULE, true);
  if (rule->flags & MT_RULE_OUTERMOST) return stop_walk(w, MT_END_COMPLETE, false);
  if (rule->flags & MT_RULE_UNSUPPORTED) return stop_walk(w, MT_END_UNSUPPORTED, true);

  __u64 cfa = (rule->cfa_reg == MT_CFA_RBP ? w->rbp : w->cfa) + (__s64)rule->cfa_offset;
  if (cfa <= w->cfa) return stop_walk(w, MT_END_BAD_FRAME, false);
  __u64 return_address, rbp = w->rbp;
  bool rbp_saved = rule->flags & MT_RULE_RBP_SAVED;
  if (rbp_saved && rule->rbp_offset == -16 && cfa - 16 >= w->sp + w->len) {
    /* A frame that pushed rbp right after the call, past the copy: both
     * words in one read (each helper call costs ~100 ns here). */
    __u64 pair[2];
    if ((cfa & 7) || cfa > w->limit || bpf_probe_read_user(pair, sizeof(pair), (void*)(cfa - 16)) != 0)
      return stop_walk(w, MT_END_TRUNCATED, false);
    w->live_reads += 2;
    rbp = pair[0];
    return_address = pair[1];
  } else {
    if (!read_stack_word(w, cfa - 8, &return_address)) return stop_walk(w, MT_END_TRUNCATED, false);
    if (rbp_saved && !read_stack_word(w, cfa + (__s64)rule->rbp_offset, &rbp)) return stop_walk(w, MT_END_TRUNCATED, false);
  }
  if (return_address == 0) return stop_walk(w, MT_END_COMPLETE, false);
  w->cfa = cfa;
  w->rbp = rbp;
  w->pc = return_address;
  return 0;
}

struct raw_hash {
  struct stack_copy* copy;
  __u64 words;
  __u64 hash;
};

/* Eight words per callback: each callback costs ~10 ns with SRSO. */
static long hash_raw_words(__u32 index, void* data) {
  struct raw_hash* h = data;
  __u64 first = (__u64)index * 8;
  if (first >= h->words) return 1;
  for (int i = 0; i < 8; i++) {
    __u64 word = first + i;
    if (word >= h->words) break;
    h->hash = fnv_word(h->hash, *(__u64*)(h->copy->bytes + ((word * 8) & COPY_WORD_MASK)));
  }
  return 0;
}

struct code_filter {
  struct stack_work* work;
  __u64 code_start; /* the lowest executable mapping's start */
  __u64 code_end;   /* the highest one's end */
  __u32 count;
  __u32 kept;
};

/* Keeps the frame-pointer chain up to its first word outside the span of the
 * process's executable mappings: in code without frame pointers rbp may point
 * anywhere (into the environment strings too), and the kernel then reports
 * whatever word it found there as a return address. (A lookup of each word
 * in the module table would be exact, but makes the verifier give up.) */
static long keep_code_addresses(__u32 index, void* data) {
  struct code_filter* f = data;
  if (index >= f->count || index >= MT_MAX_FP_FRAMES) return 1;
  /* The verifier loses the bound of a spilled index: mask it where clang
   * cannot drop the mask (the check above leaves the index unchanged). */
  __u64 i = index;
  asm volatile("%0 &= %1" : "+r"(i) : "i"(MT_MAX_FP_FRAMES));
  __u64 pc = f->work->fp_chain[i];
  if (pc - 1 < f->code_start || pc - 1 >= f->code_end) return 1;
  f->kept = index + 1;
  return 0;
}

static __always_inline void snapshot_registers(struct pt_regs* ctx, __u64* regs) {
  regs[0] = LOAD_CTX_FIELD(ctx, ax);
  regs[1] = LOAD_CTX_FIELD(ctx, dx);
  regs[2] = LOAD_CTX_FIELD(ctx, cx);
  regs[3] = LOAD_CTX_FIELD(ctx, bx);
  regs[4] = LOAD_CTX_FIELD(ctx, si);
  regs[5] = LOAD_CTX_FIELD(ctx, di);
  regs[6] = LOAD_CTX_FIELD(ctx, bp);
  regs[7] = LOAD_CTX_FIELD(ctx, sp);
  regs[8] = LOAD_CTX_FIELD(ctx, r8);
  regs[9] = LOAD_CTX_FIELD(ctx, r9);
  regs[10] = LOAD_CTX_FIELD(ctx, r10);
  regs[11] = LOAD_CTX_FIELD(ctx, r11);
  regs[12] = LOAD_CTX_FIELD(ctx, r12);
  regs[13] = LOAD_CTX_FIELD(ctx, r13);
  regs[14] = LOAD_CTX_FIELD(ctx, r14);
  regs[15] = LOAD_CTX_FIELD(ctx, r15);
  regs[16] = LOAD_CTX_FIELD(ctx, ip);
}

static __always_inline void count_walk_end(struct mt_kernel_counters* c, __u32 end) {
  switch (end) {
    case MT_END_COMPLETE: c->walks_complete++; break;
    case MT_END_TRUNCATED: c->walks_truncated++; break;
    case MT_END_FRAME_LIMIT: c->walks_frame_limit++; break;
    case MT_END_NO_MODULE: c->walks_no_module++; break;
    case MT_END_NO_RULE: c->walks_no_rule++; break;
    case MT_END_UNSUPPORTED: c->walks_unsupported++; break;
    case MT_END_BAD_FRAME: c->walks_bad_frame++; break;
  }
}

/* Keeps clang from moving a bounds check away from the value's use. */
#define OPAQUE(v) asm volatile("" : "+r"(v))

/* Writes the definition to the stack ring; false when the ring is full. */
static __always_inline bool emit_definition(struct stack_work* work, struct stack_copy* copy, __u64 raw_len,
                                            bool stop) {
  __u64 frames = work->header.frames;
  if (frames > MT_MAX_FRAMES) frames = MT_MAX_FRAMES;
  __u64 chain_bytes = (frames * 8) & (MT_MAX_FRAMES * 8 * 2 - 1);
  if (raw_len > MT_MAX_STACK_BYTES) raw_len = MT_MAX_STACK_BYTES;
  __u64 fp_frames = work->header.fp_frames;
  if (fp_frames > MT_MAX_FP_FRAMES) fp_frames = MT_MAX_FP_FRAMES;
  __u64 fp_bytes = (fp_frames * 8) & 1023;
  __u64 size = sizeof(work->header) + chain_bytes + raw_len + fp_bytes;
  struct bpf_dynptr record;
  if (bpf_ringbuf_reserve_dynptr(&stack_events, size, 0, &record) != 0) {
    bpf_ringbuf_discard_dynptr(&record, 0);
    return false;
  }
  /* Stop, then publish: the recorder's SIGCONT must not come first. */
  work->header.stopped = stop && stop_current() ? MT_STACK_STOPPED : MT_STACK_NOT_WAITING;
  work->header.py_frames = 0; /* the interposer's alone */
  work->header.py_codes = 0;
  bpf_dynptr_write(&record, 0, &work->header, sizeof(work->header), 0);
  OPAQUE(chain_bytes);
  if (chain_bytes > 0 && chain_bytes <= MT_MAX_FRAMES * 8)
    bpf_dynptr_write(&record, sizeof(work->header), work->chain, chain_bytes, 0);
  OPAQUE(raw_len);
  if (raw_len > 0 && raw_len <= MT_MAX_STACK_BYTES)
    bpf_dynptr_write(&record, sizeof(work->header) + chain_bytes, copy->bytes, raw_len, 0);
  OPAQUE(fp_bytes);
  if (fp_bytes > 0 && fp_bytes <= MT_MAX_FP_FRAMES * 8)
    bpf_dynptr_write(&record, sizeof(work->header) + chain_bytes + raw_len, work->fp_chain, fp_bytes, 0);
  bpf_ringbuf_submit_dynptr(&record, 0);
  return true;
}

/* Captures the caller's stack at an allocator's entry. Returns the hash of
 * its definition (emitted now if it is new), 0 when no stack was captured. */
static __always_inline __u64 capture_stack(struct pt_regs* ctx, struct thread_state* st) {
  st->call.rewalk_pc = 0; /* an earlier call left by longjmp never returned */
  __u32 zero = 0, cpu = bpf_get_smp_processor_id();
  struct stack_work* work = bpf_map_lookup_elem(&stack_works, &zero);
  struct stack_copy* copy = bpf_map_lookup_elem(&stack_copies, &cpu);
  struct mt_kernel_counters* c = kernel_counters();
  if (!work || !copy || !c) return 0;
  if (work->busy) { /* only if a capture was preempted on this CPU */
    c->stack_scratch_busy++;
    return 0;
  }
  work->busy = 1;
  __u64 hash = 0;
  struct task_struct* task = bpf_get_current_task_btf();
  __u64 sp = LOAD_CTX_FIELD(ctx, sp);
  __u64 limit = 0;
  __u64 len = copy_stack(copy, work, st, task, sp, &limit);
  if (len < 8) {
    c->stack_copy_failed++;
    goto out;
  }
  c->stacks_captured++;
  work->header.pid = task->tgid;
  work->header.tid = task->pid;
  work->header.sp = sp;
  work->header.miss_pc = 0;
  work->header.raw_len = 0;
  work->header.stopped = 0;

  if (stack_mode == MT_STACKS_RAW) {
    /* The seed's identity: the raw bytes. */
    struct raw_hash h = {.copy = copy, .words = len / 8, .hash = FNV_OFFSET};
    bpf_loop(MT_MAX_STACK_BYTES / 64, hash_raw_words, &h, 0);
    hash = fnv_word(h.hash, len);
    work->header.frames = 0;
    work->header.end = MT_END_NOT_WALKED;
  } else {
    /* At the entry the return address is at sp and the caller's frame
     * resumes at sp + 8 with rbp untouched. */
    struct walk w = {
        .work = work,
        .copy = copy,
        .sp = sp,
        .len = len,
        .limit = limit,
        .cfa = sp + 8,
        .rbp = LOAD_CTX_FIELD(ctx, bp),
        .pc = *(__u64*)copy->bytes,
        .hash = FNV_OFFSET,
        .end = MT_END_TRUNCATED,
    };
    __u32 tgid = task->tgid;
    w.modules = bpf_map_lookup_elem(&module_tables, &tgid);
    if (w.modules) {
      start_walk(&w);
      bpf_loop(MT_MAX_FRAMES + 1, walk_frame, &w, 0);
    } else {
      w.end = MT_END_NO_MODULE;
      work->header.miss_pc = w.pc;
    }
    count_walk_end(c, w.end);
    c->stack_live_reads += w.live_reads;
    work->header.frames = w.frames;
    work->header.end = w.end;
    if (MT_END_CHAIN_IS_FINAL(w.end)) {
      /* A chain cut short (truncated, frame-limit) is a definition of its
       * own: the end is part of the hash. */
      hash = fnv_word(fnv_word(w.hash, w.frames), w.end);
    } else {
      /* A walk stopped short may be shared by different call paths: the raw
       * copy must be kept for each, so the definition is never reused. */
      hash = fnv_word(w.hash ^ bpf_ktime_get_ns(), cpu) | 1;
    }
  }
  if (hash == 0) hash = FNV_OFFSET;
  work->header.hash = hash;

  __u8 one = 1;
  bool complete = MT_END_CHAIN_IS_FINAL(work->header.end);
  /* A lookup first: an LRU update costs far more, even when it fails. */
  if ((complete || stack_mode == MT_STACKS_RAW) &&
      (bpf_map_lookup_elem(&seen_stacks, &hash) || bpf_map_update_elem(&seen_stacks, &hash, &one, BPF_NOEXIST) != 0))
    goto out; /* defined before */
  work->header.timestamp = bpf_ktime_get_ns();
  __u64 raw_len = 0;
  work->header.fp_frames = 0;
  if (!complete) {
    raw_len = len;
    snapshot_registers(ctx, work->header.regs);
    /* The kernel's frame-pointer walk reads user memory beyond the copy:
     * for code built with frame pointers it may reach further. */
    long fp_bytes = bpf_get_stack(ctx, work->fp_chain, sizeof(work->fp_chain), BPF_F_USER_STACK);
    __u32 tgid = task->tgid;
    struct mt_module_table* modules = bpf_map_lookup_elem(&module_tables, &tgid);
    if (fp_bytes > 0 && modules && modules->count > 0) {
      struct code_filter filter = {
          .work = work,
          .code_start = modules->modules[0].start,
          .code_end = modules->modules[(modules->count - 1) & (MT_MAX_MODULES - 1)].end,
          .count = fp_bytes / 8,
      };
      bpf_loop(MT_MAX_FP_FRAMES, keep_code_addresses, &filter, 0);
      work->header.fp_frames = filter.kept;
    }
  }
  work->header.raw_len = raw_len;
  /* A walk short of a rule stops the process until user space has learned
   * every rule of this path from the copy: the path misses once, not once
   * per frame and per call until the rules arrive. */
  bool learn = work->header.end == MT_END_NO_RULE && !rules_full && !recording_ended;
  /* Resumed once its rules are known, the thread walks its path again when
   * the allocator returns: the callers' frames are still those of the entry. */
  st->call.rewalk_pc = learn ? work->chain[0] : 0;
  if (emit_definition(work, copy, raw_len, learn)) {
    c->stack_definitions++;
    /* Queried after a definition only: they are rare once paths repeat. */
    if (bpf_ringbuf_query(&stack_events, BPF_RB_AVAIL_DATA) >= stack_pause_bytes)
      pause_producer(task->tgid, work->header.timestamp);
  } else {
    c->stack_definitions_lost++;
    bpf_map_delete_elem(&seen_stacks, &hash);
    hash = 0;
  }
out:
  work->busy = 0;
  return hash;
}

/* At the return of an allocator whose entry stopped the thread to learn its
 * path's rules: walks the path again, on the live stack, from the caller's
 * frame (as at the entry: cfa above the return address, rbp callee-saved).
 * A walk that now finishes replaces the entry's definition, which kept a raw
 * copy the offline unwinder can only follow as far as it reaches. */
static __always_inline void rewalk_stack(struct pt_regs* ctx, struct thread_state* st) {
  __u32 zero = 0, cpu = bpf_get_smp_processor_id();
  struct stack_work* work = bpf_map_lookup_elem(&stack_works, &zero);
  struct stack_copy* copy = bpf_map_lookup_elem(&stack_copies, &cpu);
  struct mt_kernel_counters* c = kernel_counters();
  if (!work || !copy || !c || work->busy) return;
  work->busy = 1;
  struct task_struct* task = bpf_get_current_task_btf();
  __u32 tgid = task->tgid;
  __u64 sp = st->call.outer_sp + 8;
  struct walk w = {
      .work = work,
      .copy = copy,
      .sp = sp, /* len 0: every word is read live */
      .limit = stack_limit(st, task, sp),
      .cfa = sp,
      .rbp = LOAD_CTX_FIELD(ctx, bp),
      .pc = st->call.rewalk_pc,
      .hash = FNV_OFFSET,
      .end = MT_END_TRUNCATED,
  };
  w.modules = bpf_map_lookup_elem(&module_tables, &tgid);
  if (!w.modules) goto out;
  start_walk(&w);
  bpf_loop(MT_MAX_FRAMES + 1, walk_frame, &w, 0);
  c->stack_live_reads += w.live_reads;
  if (!MT_END_CHAIN_IS_FINAL(w.end)) goto out;
  c->stack_rewalks++;
  __u64 hash = fnv_word(fnv_word(w.hash, w.frames), w.end);
  if (hash == 0) hash = FNV_OFFSET;
  __u8 one = 1;
  if (bpf_map_lookup_elem(&seen_stacks, &hash) || bpf_map_update_elem(&seen_stacks, &hash, &one, BPF_NOEXIST) != 0) {
    st->call.stack_hash = hash; /* defined before */
    goto out;
  }
  work->header.hash = hash;
  work->header.timestamp = bpf_ktime_get_ns();
  work->header.pid = tgid;
  work->header.tid = task->pid;
  work->header.frames = w.frames;
  work->header.end = w.end;
  work->header.miss_pc = 0;
  work->header.sp = sp;
  work->header.raw_len = 0;
  work->header.truncated = 0;
  work->header.fp_frames = 0;
  if (emit_definition(work, copy, 0, false)) {
    c->stack_definitions++;
    st->call.stack_hash = hash;
  } else {
    c->stack_definitions_lost++;
    bpf_map_delete_elem(&seen_stacks, &hash);
  }
out:
  work->busy = 0;
}

#endif
