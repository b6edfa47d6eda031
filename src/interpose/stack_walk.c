/* The kernel walker's method (bpf/stack.bpf.h), in the process: from the
 * allocator wrapper's frame, follow each return address to its module (the
 * process's table, from the recorder) and its unwind rule (the recorder's
 * shared table, keyed by file and file offset as in the kernel), hash the
 * chain with the same FNV steps, and define each new path once per process.
 * A walk short of a module or rule (or with CFI it cannot follow) keeps the
 * raw stack and the registers instead, for the offline unwinder, with a hash
 * of its own: exactly what the kernel emits then.
 *
 * Each thread keeps the rules of the return addresses it walked last (a
 * frame cache, private to the process): deep stacks repeat their callers'
 * frames, and a rule found once is the table's answer for as long as the
 * process's module table stays the same (its sequence count): the cache is
 * emptied when it changes, and holds only rules found, never a miss.
 *
 * Each thread also keeps its last complete walk from each of a few
 * allocation sites (by the first return address): each frame's state
 * (return address, CFA, rbp) and the stack words the walk read past it. A
 * walk that reaches a frame in the same state as a frame of that walk goes
 * the same way from there as long as the same words hold the same values
 * (the rules are the same under the same table): it reads those words
 * again, with the same bounds checks, and takes the rest of the chain from
 * the kept walk when all match, without a rule lookup and without the
 * chain of dependent loads of a walk. From the first frame on (a site
 * allocating again from the same path: a loop), the hash is the kept
 * walk's too.
 *
 * Reads stay inside the thread's stack mapping, below the main thread's
 * argument area (found once per thread in /proc/self/maps and
 * /proc/self/stat, as the kernel finds them with bpf_find_vma and mm's
 * start_stack). No allocation, no lock, plain syscalls: async-signal-safe. */
#define _GNU_SOURCE
#include "stack_walk.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "event_time.h"
#include "python_frames.h"
#include "recording_over.h"
#include "wire/stack_table.h"

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x00000100000001b3ULL
#define SEEN_SLOTS (1u << 16) /* paths a process defines before it repeats definitions */
#define SEEN_PROBES 32u
#define FRAME_CACHE_BITS 11 /* return addresses a thread keeps the rules of */
#define WALK_SITE_BITS 5    /* allocation sites a thread keeps its last walk from */
#define WALK_SITES (1u << WALK_SITE_BITS)

static struct mt_shm_header* shm;
static void* table;
static struct mt_stacks_header* header;
/* The hashes this process has defined (inherited by a fork, like the
 * kernel's set is shared: a child's definition of the same path is the same). */
static __u64* seen;
/* This process's slot in the table, found on first use. */
static __u32 slot_pid;
static struct mt_process_slot* slot;

/* A return address's rule as the tables gave it (rules whose rbp offset does
 * not fit are not kept). */
struct frame_rule {
  __u64 pc; /* 0: empty */
  __s32 cfa_offset;
  __s16 rbp_offset;
  __u8 cfa_reg;
  __u8 flags;
};

/* A frame of a walk, as walk_stack went: its state (pc: its return
 * address, cfa, rbp), then the words read past it: its caller's return
 * address at the next frame's cfa - 8 (for the last frame at the record's
 * end_slot, 0 when its rule said outermost), then its caller's rbp at
 * rbp_slot when the rule saved it (0: not read; the caller's rbp is then
 * this frame's). rbp is the walk's only input not read from the stack, and
 * it is often any value (code without frame pointers keeps data there): it
 * matters from a frame on only when a CFA is found from it before a rule
 * restores it from the stack. */
struct walked_frame {
  __u64 pc;
  __u64 cfa;
  __u64 rbp; /* as the walk had it: may be a kept walk's where it does not matter */
  __u64 rbp_slot;
  __u32 cfa_from_rbp; /* this frame's caller's CFA was found from rbp */
  __u32 rbp_matters;  /* the walk from here on depends on rbp */
};

/* A walk's frames, innermost first. */
struct walk_record {
  __u32 frames; /* 0: nothing kept */
  __u32 defined; /* the process defined its path (or found it defined) */
  __u64 python_defined; /* the last path with Python frames from this walk the process defined (its hash) */
  __u64 end_slot;
  __u64 hash;    /* the chain's (fnv_word over the pcs) */
  struct walked_frame frame[MT_MAX_FRAMES];
};

/* A thread's frame cache, by its chunk's index: valid for the table of
 * `process` at `sequence` (a forked child's cache, a copy, is for its
 * parent's). The last complete walk from each site is records[site_record
 * [site]] when `kept` has the site's bit; records[spare] takes the walk in
 * progress and trades places with its site's once it completes. */
struct frame_cache {
  const struct mt_process_slot* process;
  __u32 sequence; /* odd: nothing valid */
  __u32 kept;
  __u8 site_record[WALK_SITES];
  __u8 spare;
  __u8 pad[7];
  struct frame_rule rules[1u << FRAME_CACHE_BITS];
  struct walk_record records[WALK_SITES + 1];
  struct mt_python_stack python; /* the Python frames of the allocation being captured */
};
/* One per chunk, mapped when a thread of this process first walks with it
 * (an own mapping: MT_OWN_MAPPING_FD): a process reserves address space for
 * the chunks its threads use, not for every chunk. */
static struct frame_cache** frame_caches;
static __u32 frame_cache_count;

static inline __u64 fnv_word(__u64 hash, __u64 word) { return (hash ^ word) * FNV_PRIME; }

static const char* env_value(const char* name) {
  extern char** environ;
  size_t length = strlen(name);
  for (char** e = environ; e && *e; ++e)
    if (strncmp(*e, name, length) == 0 && (*e)[length] == '=') return *e + length + 1;
  return NULL;
}

int mt_stacks_open(struct mt_shm_header* events) { return mt_stacks_open_at(events, env_value(MT_STACKS_ENV)); }

int mt_stacks_open_at(struct mt_shm_header* events, const char* path) {
  if (!path) return 1;
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return 0;
  void* base = mmap(NULL, mt_stacks_size(events->chunk_count), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return 0;
  struct mt_stacks_header* h = base;
  /* Memtrack's, not the program's: marked for the kernel (MT_OWN_MAPPING_FD). */
  void* set = mmap(NULL, SEEN_SLOTS * sizeof(__u64), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   MT_OWN_MAPPING_FD, 0);
  size_t caches_size = events->chunk_count * sizeof(struct frame_cache*);
  void* caches = mmap(NULL, caches_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, MT_OWN_MAPPING_FD, 0);
  if (h->magic != MT_STACKS_MAGIC || h->version != MT_STACKS_VERSION || set == MAP_FAILED || caches == MAP_FAILED) {
    if (set != MAP_FAILED) munmap(set, SEEN_SLOTS * sizeof(__u64));
    if (caches != MAP_FAILED) munmap(caches, caches_size);
    munmap(base, mt_stacks_size(events->chunk_count));
    return 0;
  }
  shm = events;
  table = base;
  header = h;
  seen = set;
  frame_caches = caches;
  frame_cache_count = events->chunk_count;
  const char* python_frames = env_value(MT_PYTHON_FRAMES_ENV);
  if (!python_frames || strcmp(python_frames, "0") != 0) mt_python_open(h, env_value("PYTHONMALLOC"), (__u32)getpid());
  return 1;
}

int mt_stacks_on(void) { return header != NULL; }

void mt_stacks_close(void) {
  if (!header) return;
  for (__u32 i = 0; i < frame_cache_count; ++i)
    if (frame_caches[i]) munmap(frame_caches[i], sizeof(struct frame_cache));
  munmap(frame_caches, frame_cache_count * sizeof(struct frame_cache*));
  munmap(seen, SEEN_SLOTS * sizeof(__u64));
  munmap(table, mt_stacks_size(shm->chunk_count));
  shm = NULL;
  table = NULL;
  header = NULL;
  seen = NULL;
  slot_pid = 0;
  slot = NULL;
  frame_caches = NULL;
  frame_cache_count = 0;
}

/* ------------------------------------------------------------------ bounds */

static int read_some(int fd, char* buffer, size_t size) {
  for (;;) {
    ssize_t got = read(fd, buffer, size);
    if (got >= 0 || errno != EINTR) return (int)got;
  }
}

static __u64 parse_hex(const char** p) {
  __u64 value = 0;
  for (;; ++*p) {
    char c = **p;
    if (c >= '0' && c <= '9') value = value * 16 + (__u64)(c - '0');
    else if (c >= 'a' && c <= 'f') value = value * 16 + (__u64)(c - 'a' + 10);
    else return value;
  }
}

/* The mapping of /proc/self/maps holding `sp`: 1 when found. */
static int stack_mapping(__u64 sp, __u64* low, __u64* high) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buffer[4096];
  size_t kept = 0;
  int found = 0;
  for (;;) {
    int got = read_some(fd, buffer + kept, sizeof(buffer) - kept - 1);
    if (got <= 0) break;
    size_t filled = kept + (size_t)got;
    buffer[filled] = '\0';
    char* line = buffer;
    for (char* end; (end = memchr(line, '\n', (size_t)(buffer + filled - line))) != NULL; line = end + 1) {
      const char* p = line;
      __u64 start = parse_hex(&p);
      if (*p++ != '-') continue;
      __u64 stop = parse_hex(&p);
      if (sp >= start && sp < stop) {
        *low = start;
        *high = stop;
        found = 1;
        break;
      }
    }
    if (found) break;
    kept = (size_t)(buffer + filled - line);
    if (kept == sizeof(buffer) - 1) kept = 0; /* a line longer than the buffer: its start is enough */
    memmove(buffer, line, kept);
  }
  close(fd);
  return found;
}

/* The main thread's argc, above which lie the arguments and environment
 * (/proc/self/stat's startstack, field 28: the kernel's mm->start_stack). */
static __u64 start_stack(void) {
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buffer[1024];
  int got = read_some(fd, buffer, sizeof(buffer) - 1);
  close(fd);
  if (got <= 0) return 0;
  buffer[got] = '\0';
  char* p = strrchr(buffer, ')'); /* the command name may hold anything */
  if (!p) return 0;
  /* Field 2 ends at p; field 28 is 26 spaces further. */
  for (int field = 2; field < 28 && *p; ++p)
    if (*p == ' ') ++field;
  __u64 value = 0;
  for (; *p >= '0' && *p <= '9'; ++p) value = value * 10 + (__u64)(*p - '0');
  return value;
}

/* Where reads of the stack above `sp` must stop: the end of its mapping or the
 * argument area, whichever comes first; 0 when unknown. Looked up once per
 * thread (a signal handler on another stack looks again). */
static __u64 stack_limit(struct mt_shm_chunk* c, struct mt_stack_ring* ring, __u64 sp) {
  if (ring->bounds_claim != c->claimed_ns || sp < ring->stack_low || sp >= ring->stack_high) {
    __u64 low, high;
    if (!stack_mapping(sp, &low, &high)) return 0;
    __u64 arguments = start_stack();
    if (arguments > sp && arguments < high) high = arguments;
    ring->stack_low = low;
    ring->stack_high = high;
    ring->bounds_claim = c->claimed_ns;
  }
  return ring->stack_high;
}

/* ------------------------------------------------------------------ tables */

static struct mt_process_slot* process_slot(__u32 pid) {
  if (slot_pid == pid && slot && __atomic_load_n(&slot->pid, __ATOMIC_ACQUIRE) == pid) return slot;
  struct mt_process_slot* slots = mt_stacks_processes(table);
  __u64 home = mt_stacks_process_home(pid);
  for (__u32 i = 0; i < MT_STACKS_PROCESS_SLOTS; ++i) {
    struct mt_process_slot* s = &slots[(home + i) & (MT_STACKS_PROCESS_SLOTS - 1)];
    __u32 owner = __atomic_load_n(&s->pid, __ATOMIC_ACQUIRE);
    if (owner == 0) return NULL;
    if (owner == pid) {
      slot_pid = pid;
      slot = s;
      return s;
    }
  }
  return NULL;
}

static const struct mt_module* find_module(const struct mt_module_table* t, __u64 address) {
  __u32 lo = 0, hi = t->count < MT_MAX_MODULES ? t->count : MT_MAX_MODULES;
  while (lo < hi) {
    __u32 mid = (lo + hi) / 2;
    const struct mt_module* m = &t->modules[mid];
    if (address < m->start)
      hi = mid;
    else if (address >= m->end)
      lo = mid + 1;
    else
      return m;
  }
  return NULL;
}

static const struct mt_unwind_rule* find_prepared_rule(__u32 file_id, __u64 file_offset) {
  if (file_id >= MT_STACKS_FILES) return NULL;
  const struct mt_file_rules* f = &mt_stacks_files(table)[file_id];
  if (__atomic_load_n(&f->count, __ATOMIC_ACQUIRE) == 0 || file_offset < f->base) return NULL;
  __u64 page = (file_offset - f->base) >> 12;
  if (page >= f->pages) return NULL;
  __u32* index = mt_stacks_region_index(table, f);
  const struct mt_region_rule* rules = mt_region_rules(index, f->pages);
  __u32 low = index[page], high = index[page + 1]; /* the page's rules: [low, high) */
  while (low < high) {
    __u32 middle = low + (high - low) / 2;
    if (rules[middle].file_offset < file_offset)
      low = middle + 1;
    else
      high = middle;
  }
  return low < index[page + 1] && rules[low].file_offset == file_offset ? &rules[low].rule : NULL;
}

static const struct mt_unwind_rule* find_rule(__u32 file_id, __u64 file_offset) {
  const struct mt_unwind_rule* prepared = find_prepared_rule(file_id, file_offset);
  if (prepared) return prepared;
  struct mt_rule_slot* rules = mt_stacks_rules(table);
  __u64 home = mt_stacks_rule_home(file_id, file_offset);
  for (__u32 i = 0; i < MT_STACKS_RULE_PROBES; ++i) {
    struct mt_rule_slot* s = &rules[(home + i) & (MT_STACKS_RULE_SLOTS - 1)];
    __u32 id = __atomic_load_n(&s->file_id_plus_one, __ATOMIC_ACQUIRE);
    if (id == 0) return NULL;
    if (id == file_id + 1 && s->file_offset == file_offset) return &s->rule;
  }
  return NULL;
}

/* ------------------------------------------------------------------ walk */

struct walk {
  const struct mt_module_table* modules;
  struct frame_cache* cache;
  __u64 sp;    /* where the return address into the caller is */
  __u64 limit; /* reads stay below */
  __u64 cfa;
  __u64 rbp;
  __u64 pc;
  __u64 hash;
  __u64 miss_pc;
  __u32 miss_file_id; /* MT_END_NO_RULE: the rule missing */
  __u64 miss_offset;
  __u32 frames;
  __u32 end;
  struct walk_record* record; /* the walk's frames; NULL: the one frame is `pc` */
  __u32 site;
};

/* The thread's frame cache for walks with `process`'s table at `sequence`
 * (even), emptied first if its rules were found under another table; NULL
 * when it cannot be mapped. Only the chunk's thread maps its cache. */
static struct frame_cache* frame_cache_for(__u32 index, const struct mt_process_slot* process, __u32 sequence) {
  if (index >= frame_cache_count) return NULL;
  struct frame_cache* cache = frame_caches[index];
  if (!cache) {
    void* mapped = mmap(NULL, sizeof(struct frame_cache), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, MT_OWN_MAPPING_FD, 0);
    if (mapped == MAP_FAILED) return NULL;
    cache = frame_caches[index] = mapped;
  }
  if (cache->process != process || cache->sequence != sequence) {
    /* A cache never used is still the mapping's zeros: its pages stay untouched. */
    if (cache->process) {
      memset(cache->rules, 0, sizeof(cache->rules));
    } else {
      for (__u32 i = 0; i < WALK_SITES; ++i) cache->site_record[i] = (__u8)i;
      cache->spare = WALK_SITES;
    }
    cache->kept = 0;
    cache->process = process;
    cache->sequence = sequence;
  }
  return cache;
}

static inline struct frame_rule* frame_rule_slot(struct frame_cache* cache, __u64 pc) {
  return &cache->rules[(pc ^ (pc >> FRAME_CACHE_BITS)) & ((1u << FRAME_CACHE_BITS) - 1)];
}

/* The rule of return address `pc` from the tables, into `rule`; 0 when the
 * walk ends here for want of a module or a rule (noted in `w`). */
static int table_rule(struct walk* w, __u64 pc, struct mt_unwind_rule* rule) {
  const struct mt_module* module = find_module(w->modules, pc - 1);
  if (!module) {
    w->end = MT_END_NO_MODULE;
    w->miss_pc = pc;
    return 0;
  }
  const struct mt_unwind_rule* found = find_rule(module->file_id, pc - module->start + module->file_offset);
  if (!found) {
    w->end = MT_END_NO_RULE;
    w->miss_pc = pc;
    w->miss_file_id = module->file_id;
    w->miss_offset = pc - module->start + module->file_offset;
    return 0;
  }
  *rule = *found;
  return 1;
}

/* The rule of return address `pc`: from the thread's frame cache, else from
 * the tables (then kept). */
static inline int frame_rule(struct walk* w, __u64 pc, struct mt_unwind_rule* rule) {
  struct frame_rule* kept = frame_rule_slot(w->cache, pc);
  if (kept->pc == pc && pc != 0) {
    rule->cfa_reg = kept->cfa_reg;
    rule->flags = kept->flags;
    rule->cfa_offset = kept->cfa_offset;
    rule->rbp_offset = kept->rbp_offset;
    return 1;
  }
  if (!table_rule(w, pc, rule)) return 0;
  if (rule->rbp_offset == (__s16)rule->rbp_offset) {
    kept->pc = pc;
    kept->cfa_offset = rule->cfa_offset;
    kept->rbp_offset = (__s16)rule->rbp_offset;
    kept->cfa_reg = rule->cfa_reg;
    kept->flags = rule->flags;
  }
  return 1;
}

static int read_word(const struct walk* w, __u64 address, __u64* out) {
  if (address < w->sp || (address & 7) || address + 8 > w->limit) return 0;
  *out = *(const volatile __u64*)(uintptr_t)address;
  return 1;
}

/* Whether the walk, at frame `frames` in the state of `last`'s frame `j`,
 * would go on as `last` went: every word `last` read from frame j on passes
 * the same checks now and holds the same value (a restored rbp: where it
 * matters). Else `*differs` is the first frame whose words differ. */
static int same_from(const struct walk* w, const struct walk_record* last, __u32 j, __u32 frames, __u32* differs) {
  __u32 n = last->frames;
  if (frames + (n - j) > MT_MAX_FRAMES) {
    *differs = n;
    return 0;
  }
  const struct walked_frame* f = last->frame;
  for (__u32 i = j; i + 1 < n; ++i) {
    __u64 word, rbp_word;
    if (!read_word(w, f[i + 1].cfa - 8, &word) || word != f[i + 1].pc ||
        (f[i].rbp_slot &&
         (!read_word(w, f[i].rbp_slot, &rbp_word) || (f[i + 1].rbp_matters && rbp_word != f[i + 1].rbp)))) {
      *differs = i;
      return 0;
    }
  }
  __u64 word;
  if ((last->end_slot && (!read_word(w, last->end_slot, &word) || word != 0)) ||
      (f[n - 1].rbp_slot && !read_word(w, f[n - 1].rbp_slot, &word))) {
    *differs = n - 1;
    return 0;
  }
  return 1;
}

/* The frame's state is kept in locals: the stores into the record and the
 * cache would otherwise have it reloaded from `w` at every frame. */
static void walk_stack(struct walk* w) {
  struct frame_cache* cache = w->cache;
  struct walk_record* r = w->record;
  const struct walk_record* last = &cache->records[cache->site_record[w->site]];
  __u64 pc = w->pc, cfa = w->cfa, rbp = w->rbp, hash = w->hash;
  __u32 frames = w->frames, end;
  /* The kept walk's frame at or above this one's CFA, and the first frame
   * whose words were found to differ (no state match below it is tried). */
  __u32 j = 0, n = (cache->kept >> w->site) & 1 ? last->frames : 0, tried = 0;
  __u32 walked = MT_MAX_FRAMES + 1; /* frames walked before those taken from the kept walk */
  r->end_slot = 0;
  for (;;) {
    if (frames >= MT_MAX_FRAMES) {
      end = MT_END_FRAME_LIMIT;
      break;
    }
    while (j < n && last->frame[j].cfa < cfa) ++j;
    if (j < n && j >= tried && last->frame[j].cfa == cfa && last->frame[j].pc == pc &&
        (!last->frame[j].rbp_matters || last->frame[j].rbp == rbp)) {
      __u32 differs;
      if (same_from(w, last, j, frames, &differs)) {
        if (frames == 0 && j == 0) {
          /* The kept walk whole: its record serves as it is. */
          w->record = (struct walk_record*)last;
          hash = last->hash;
          frames = n;
          __atomic_fetch_add(&header->walks_repeated, 1, __ATOMIC_RELAXED);
        } else {
          __u32 rest = n - j;
          walked = frames;
          memcpy(&r->frame[frames], &last->frame[j], rest * sizeof(struct walked_frame));
          r->end_slot = last->end_slot;
          for (__u32 i = frames; i < frames + rest; ++i) hash = fnv_word(hash, r->frame[i].pc);
          frames += rest;
          __atomic_fetch_add(&header->walks_joined, 1, __ATOMIC_RELAXED);
        }
        pc = last->frame[n - 1].pc;
        end = MT_END_COMPLETE;
        break;
      }
      tried = differs + 1;
    }
    r->frame[frames] = (struct walked_frame){pc, cfa, rbp, 0, 0, 0};
    ++frames;
    hash = fnv_word(hash, pc);
    struct mt_unwind_rule rule;
    if (!frame_rule(w, pc, &rule)) {
      end = w->end;
      break;
    }
    if (rule.flags & MT_RULE_OUTERMOST) {
      end = MT_END_COMPLETE;
      break;
    }
    if (rule.flags & MT_RULE_UNSUPPORTED) {
      end = MT_END_UNSUPPORTED;
      w->miss_pc = pc;
      break;
    }
    __u64 caller_cfa = (rule.cfa_reg == MT_CFA_RBP ? rbp : cfa) + (__s64)rule.cfa_offset;
    r->frame[frames - 1].cfa_from_rbp = rule.cfa_reg == MT_CFA_RBP;
    if (caller_cfa <= cfa) {
      end = MT_END_BAD_FRAME;
      break;
    }
    __u64 return_address, caller_rbp = rbp;
    if (rule.flags & MT_RULE_RBP_SAVED) r->frame[frames - 1].rbp_slot = caller_cfa + (__s64)rule.rbp_offset;
    if (!read_word(w, caller_cfa - 8, &return_address) ||
        ((rule.flags & MT_RULE_RBP_SAVED) && !read_word(w, caller_cfa + (__s64)rule.rbp_offset, &caller_rbp))) {
      end = MT_END_TRUNCATED;
      break;
    }
    if (return_address == 0) {
      r->end_slot = caller_cfa - 8;
      end = MT_END_COMPLETE;
      break;
    }
    cfa = caller_cfa;
    rbp = caller_rbp;
    pc = return_address;
  }
  if (w->record == r) {
    r->frames = frames;
    r->hash = hash;
    r->defined = 0;
    r->python_defined = 0;
    if (end == MT_END_COMPLETE) {
      /* Whether rbp matters, from the outermost frame walked here in. */
      if (walked > frames) walked = frames;
      __u32 matters = walked < frames && r->frame[walked].rbp_matters;
      for (__u32 i = walked; i-- > 0;) {
        struct walked_frame* f = &r->frame[i];
        matters = f->cfa_from_rbp || (!f->rbp_slot && matters);
        f->rbp_matters = matters;
      }
    }
  }
  w->pc = pc;
  w->cfa = cfa;
  w->rbp = rbp;
  w->hash = hash;
  w->frames = frames;
  w->end = end;
}

static void count_end(__u32 end) {
  __u64* counter;
  switch (end) {
    case MT_END_COMPLETE: counter = &header->walks_complete; break;
    case MT_END_TRUNCATED: counter = &header->walks_truncated; break;
    case MT_END_FRAME_LIMIT: counter = &header->walks_frame_limit; break;
    case MT_END_NO_MODULE: counter = &header->walks_no_module; break;
    case MT_END_NO_RULE: counter = &header->walks_no_rule; break;
    case MT_END_UNSUPPORTED: counter = &header->walks_unsupported; break;
    default: counter = &header->walks_bad_frame; break;
  }
  __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

/* A seen slot holds a hash once its definition is on the ring, and the hash
 * with this bit flipped while the thread that claimed it writes it: another
 * thread meeting the path then defines it too (a duplicate the report
 * ignores) rather than allocate before the definition exists. */
#define SEEN_BEING_DEFINED (1ULL << 63)

/* True when the process defined `hash` before. Else, when this thread is the
 * first, `*claimed` is its slot, for published() once the definition is
 * written. */
static int defined_before(__u64 hash, __u64** claimed) {
  __u64 home = (hash * 0x9e3779b97f4a7c15ULL) >> 48;
  __u64 being_defined = hash ^ SEEN_BEING_DEFINED;
  *claimed = NULL;
  for (__u32 i = 0; i < SEEN_PROBES; ++i) {
    __u64* s = &seen[(home + i) & (SEEN_SLOTS - 1)];
    __u64 value = __atomic_load_n(s, __ATOMIC_ACQUIRE);
    if (value == hash) return 1;
    if (value == being_defined) return 0;
    if (value == 0) {
      if (__atomic_compare_exchange_n(s, &value, being_defined, 0, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
        *claimed = s;
        return 0;
      }
      if (value == hash) return 1;
      if (value == being_defined) return 0;
    }
  }
  __atomic_fetch_add(&header->seen_set_full, 1, __ATOMIC_RELAXED);
  return 0;
}

/* The claimed path's definition is on the ring (or lost, counted): others
 * may now allocate with it. */
static void published(__u64* claimed, __u64 hash) {
  if (claimed) __atomic_store_n(claimed, hash, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------ ring */


/* Wakes the recorder's poller. */
static void ring_doorbell(void) {
  __atomic_fetch_add(&shm->doorbell, 1, __ATOMIC_RELEASE);
  syscall(SYS_futex, &shm->doorbell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Waits until `bytes` fit in the ring; 0 when recording is over meanwhile. */
static int wait_for_room(struct mt_stack_ring* ring, __u64 head, __u64 bytes) {
  int waited = 0;
  for (;;) {
    __u64 tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
    if (MT_STACKS_RING_BYTES - (head - tail) >= bytes) return 1;
    if (!waited++) __atomic_fetch_add(&header->ring_waits, 1, __ATOMIC_RELAXED);
    if (mt_recording_over(shm)) return 0;
    ring_doorbell();
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
}

/* Writes the definition of walk `w` (with `raw_len` bytes of stack from its
 * sp and `regs` when it stopped short) to the ring; 0 when it could not. */
static int define(struct mt_shm_chunk* c, struct mt_stack_ring* ring, const struct walk* w, __u64 hash,
                  __u32 raw_len, int truncated, const __u64* regs, __u8 waiting, const struct mt_python_stack* python) {
  __u64 python_bytes = python ? (__u64)python->frames * sizeof(struct mt_python_frame) + python->code_bytes : 0;
  __u64 record = sizeof(struct mt_stack_header) + (__u64)w->frames * 8 + raw_len + python_bytes;
  __u64 need = (8 + record + 7) & ~7ull;
  __u64 head = ring->head, before = head;
  __u64 position = head & (MT_STACKS_RING_BYTES - 1);
  __u64 padding = position + need > MT_STACKS_RING_BYTES ? MT_STACKS_RING_BYTES - position : 0;
  if (!wait_for_room(ring, head, padding + need)) return 0;
  if (padding) {
    *(__u32*)(ring->bytes + position) = 0; /* the rest of the ring is padding */
    head += padding;
    position = 0;
  }
  __u8* out = ring->bytes + position;
  *(__u32*)out = (__u32)record;
  *(__u32*)(out + 4) = 0;
  struct mt_stack_header* h = (struct mt_stack_header*)(out + 8);
  memset(h, 0, sizeof(*h));
  h->hash = hash;
  h->timestamp = mt_event_time(shm->clock == MT_CLOCK_TSC, 0); /* before its allocation's */
  h->pid = c->pid;
  h->tid = c->tid;
  h->frames = w->frames;
  h->end = w->end;
  h->miss_pc = w->miss_pc;
  h->sp = w->sp;
  h->raw_len = raw_len;
  h->truncated = (__u8)truncated;
  h->stopped = waiting;
  if (raw_len) memcpy(h->regs, regs, sizeof(h->regs));
  if (python) {
    h->py_frames = python->frames;
    h->py_codes = python->codes;
  }
  __u64* chain = (__u64*)(out + 8 + sizeof(*h));
  if (w->record)
    for (__u32 i = 0; i < w->frames; ++i) chain[i] = w->record->frame[i].pc;
  else
    chain[0] = w->pc;
  if (raw_len) memcpy(out + 8 + sizeof(*h) + (size_t)w->frames * 8, (const void*)(uintptr_t)w->sp, raw_len);
  if (python) {
    __u8* python_out = out + 8 + sizeof(*h) + (size_t)w->frames * 8 + raw_len;
    memcpy(python_out, python->frame, python->frames * sizeof(struct mt_python_frame));
    memcpy(python_out + python->frames * sizeof(struct mt_python_frame), python->definitions, python->code_bytes);
  }
  __atomic_store_n(&ring->head, head + need, __ATOMIC_RELEASE);
  __atomic_fetch_add(&header->definitions, 1, __ATOMIC_RELAXED);
  /* Half full: ask the recorder to drain before the thread must wait (the
   * poller's own round comes every 10 ms, and a compiler's new paths fill
   * the ring faster). */
  __u64 tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
  if (head + need - tail >= MT_STACKS_RING_BYTES / 2 && before - tail < MT_STACKS_RING_BYTES / 2) ring_doorbell();
  return 1;
}

/* Any function's entry serves as the raw copy's instruction pointer: the
 * offline unwinder finds there, as at the allocator's entry, the return
 * address at sp. */
static __attribute__((noinline)) void entry_marker(void) { __asm__ volatile(""); }

/* Walks from the wrapper's `frame`: at its entry the return address was at
 * sp and the caller's frame resumes at sp + 8 with rbp as the wrapper saved it.
 * `index`: the thread's chunk's. */
static void walk_from(struct walk* w, void* const* frame, __u64 limit, struct mt_process_slot* process,
                      __u32 index) {
  w->sp = (__u64)(uintptr_t)(frame + 1);
  w->limit = limit;
  w->cfa = w->sp + 8;
  w->rbp = (__u64)(uintptr_t)frame[0];
  w->pc = (__u64)(uintptr_t)frame[1];
  w->hash = FNV_OFFSET;
  w->miss_pc = 0;
  w->frames = 0;
  w->end = MT_END_TRUNCATED;
  w->record = NULL;
  __u32 sequence = process ? __atomic_load_n(&process->sequence, __ATOMIC_ACQUIRE) : 1;
  struct frame_cache* cache = limit == 0 || (sequence & 1) ? NULL : frame_cache_for(index, process, sequence);
  if (!cache) {
    /* Nothing can be read safely (the return address alone), or no table
     * (yet), or the recorder is rewriting it, or no memory for the cache. */
    w->frames = 1;
    w->hash = fnv_word(w->hash, w->pc);
    if (limit != 0) {
      w->end = MT_END_NO_MODULE;
      w->miss_pc = w->pc;
    }
    return;
  }
  w->modules = &process->table;
  w->cache = cache;
  w->record = &w->cache->records[w->cache->spare];
  w->site = (__u32)((w->pc ^ (w->pc >> WALK_SITE_BITS) ^ (w->pc >> (2 * WALK_SITE_BITS))) & (WALK_SITES - 1));
  struct walk_record* spare = w->record;
  walk_stack(w);
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  if (__atomic_load_n(&process->sequence, __ATOMIC_RELAXED) != sequence) {
    /* What the walk kept may come from a table read half rewritten. */
    w->cache->sequence = 1;
    __atomic_fetch_add(&header->table_changed, 1, __ATOMIC_RELAXED);
    w->end = MT_END_NO_MODULE;
    w->miss_pc = w->pc;
  } else if (w->end == MT_END_COMPLETE && w->record == spare) {
    /* The site's walk from now on; its former record is the next spare. */
    struct frame_cache* cache = w->cache;
    cache->spare = cache->site_record[w->site];
    cache->site_record[w->site] = (__u8)(spare - cache->records);
    cache->kept |= 1u << w->site;
  }
}

/* A walk stopped short may be shared by different call paths: the raw copy
 * must be kept for each, so the definition is never reused. */
static __u64 own_hash(const struct walk* w, __u32 index) {
  __u64 hash = fnv_word(w->hash ^ __rdtsc(), index) | 1; /* the TSC: a value never seen before */
  return hash;
}

/* Defines walk `w` that stopped short, with the raw copy. */
static int define_raw(struct mt_shm_chunk* c, struct mt_stack_ring* ring, const struct walk* w, void* const* frame,
                      __u64 hash, __u8 waiting, const struct mt_python_stack* python) {
  __u32 raw_len = 0;
  int truncated = 0;
  __u64 regs[MT_STACK_REGS] = {0};
  if (w->limit > w->sp) {
    __u64 available = w->limit - w->sp;
    raw_len = available < header->stack_budget ? (__u32)available : header->stack_budget;
    truncated = available > header->stack_budget;
    regs[6] = (__u64)(uintptr_t)frame[0];
    regs[7] = w->sp;
    regs[16] = (__u64)(uintptr_t)&entry_marker;
  }
  return define(c, ring, w, hash, raw_len, truncated, regs, waiting, python);
}

/* Waits until the recorder has learned the rule walk `w` missed (it learns
 * every rule of the path at once, from the raw copy and the live stack); 0
 * when it did not within a second (the learner may be busy preparing a big
 * file's rules: the raw copy then serves, unwound offline, as far as it
 * reaches), or recording is over (a killed recorder learns nothing: each
 * allocation missing a rule, in a signal handler or in a file not prepared
 * yet, would wait its second, for as long as the ring has room). */
static int wait_for_rule(const struct walk* w) {
  ring_doorbell();
  for (int i = 0; i < 1000; ++i) {
    if (find_rule(w->miss_file_id, w->miss_offset)) return 1;
    if (mt_recording_over(shm)) return 0;
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
  return 0;
}

/* The thread's Python frames when the process runs Python code, each
 * placed inside the native frame of walk `w` whose stack frame holds its
 * eval loop's state, and mixed into `hash`; NULL when there are none. */
static struct mt_python_stack* python_frames(const struct mt_shm_chunk* c, const struct walk* w,
                                             const struct mt_stack_ring* ring, __u32 index, __u64* hash) {
  if (!mt_python_on() || !w->record || index >= frame_cache_count || !frame_caches[index]) return NULL;
  struct mt_python_stack* python = &frame_caches[index]->python;
  mt_python_read(python, ring->stack_low, w->limit, c->pid);
  if (python->frames == 0) return NULL;
  mt_python_mix(python, (const __u8*)&w->record->frame[0].cfa, sizeof(struct walked_frame), w->frames,
                MT_END_CHAIN_IS_FINAL(w->end), hash);
  return python;
}

/* The process defined the path of walk `record` (with `python`'s frames,
 * hashed `hash`): the walk's next repetition skips the set's lookup. */
static void mark_defined(struct walk_record* record, const struct mt_python_stack* python, __u64 hash) {
  if (python)
    record->python_defined = hash;
  else
    record->defined = 1;
}

/* Walks short of a rule wait for the recorder to learn the path, as the
 * kernel stops the process for it: a path misses a few times at most. */
#define LEARNING_ROUNDS 4

__u64 mt_stack_capture(struct mt_shm_chunk* c, void* const* frame) {
  __u32 index = (__u32)(((char*)c - ((char*)shm + MT_SHM_CHUNKS_OFFSET)) / sizeof(struct mt_shm_chunk));
  struct mt_stack_ring* ring = mt_stacks_ring(table, index);
  __u64 limit = stack_limit(c, ring, (__u64)(uintptr_t)(frame + 1));
  struct mt_process_slot* process = process_slot(c->pid);
  struct walk w;
  walk_from(&w, frame, limit, process, index);
  for (int round = 0; w.end == MT_END_NO_RULE && round < LEARNING_ROUNDS; ++round) {
    count_end(w.end);
    /* The kernel's way: the miss is defined raw (the allocation will use the
     * walk that follows), the thread waits, the walk starts over. */
    if (!define_raw(c, ring, &w, frame, own_hash(&w, index), MT_STACK_THREAD_WAITS, NULL) || !wait_for_rule(&w))
      break;
    __atomic_fetch_add(&header->rewalks, 1, __ATOMIC_RELAXED);
    walk_from(&w, frame, limit, process, index);
  }
  count_end(w.end);
  int complete = MT_END_CHAIN_IS_FINAL(w.end);
  __u64 hash = complete ? fnv_word(fnv_word(w.hash, w.frames), w.end) : own_hash(&w, index);
  struct mt_python_stack* python = python_frames(c, &w, ring, index, &hash);
  if (hash == 0) hash = FNV_OFFSET;
  /* A kept walk repeated whole: its path is defined (the set's lookup, a
   * cache miss, is spared). */
  if (complete && w.record && (python ? !python->deferred && w.record->python_defined == hash : w.record->defined))
    return hash;
  /* A definition that left a code object out is made again, with it. */
  __u64* claimed = NULL;
  if (complete && !(python && python->deferred) && defined_before(hash, &claimed)) {
    if (w.record) mark_defined(w.record, python, hash);
    return hash;
  }
  if (python) mt_python_place_frames(python);
  int defined = complete ? define(c, ring, &w, hash, 0, 0, NULL, MT_STACK_NOT_WAITING, python)
                         : define_raw(c, ring, &w, frame, hash, MT_STACK_NOT_WAITING, python);
  published(claimed, hash);
  if (!defined) {
    __atomic_fetch_add(&header->definitions_lost, 1, __ATOMIC_RELAXED);
    return 0;
  }
  if (complete && w.record) mark_defined(w.record, python, hash);
  return hash;
}
