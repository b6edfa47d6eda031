/* memtrack's interposer: LD_PRELOADed by `memtrack record` into every process
 * of the recorded tree, it takes glibc's allocator entry points, forwards each
 * call to the next definition (RTLD_NEXT) and appends one struct
 * mt_alloc_event per logical call to its thread's chunk of the memory shared
 * with the recorder (wire/shared_memory.h): no kernel entry per call.
 *
 * Until it is ready the process's calls are seen by the uprobes as before:
 * allocations made while the loader runs, during dlsym, or in a process where
 * the interposer cannot work are recorded by the kernel side. Ready means: the
 * recorder said so for this pid (it attached the probe on
 * memtrack_interposer_ready), glibc provides malloc and this library is the
 * first definition of it. Calling memtrack_interposer_ready then flips the
 * process in the kernel (its glibc allocator probes record nothing more), and
 * from the next instruction on this library records: every call once.
 *
 * `memtrack record --pid` loads it into running processes instead (dlopen,
 * called through ptrace) and calls memtrack_attach: the wrappers are then
 * reached through the GOT entries it rewrites, until the recording is over.
 *
 * No allocation of its own, no libstdc++, nothing but plain stores and a clock
 * read on the hot path; a full chunk waits on a futex for the recorder. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/futex.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "event_time.h"
#include "got.h"
#include "recording_over.h"
#include "stack_walk.h"
#include "wire/allocators.h"
#include "wire/attach.h"
#include "wire/shared_memory.h"

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

typedef void* (*malloc_fn)(size_t);
typedef void (*free_fn)(void*);
typedef void* (*calloc_fn)(size_t, size_t);
typedef void* (*realloc_fn)(void*, size_t);
typedef void* (*reallocarray_fn)(void*, size_t, size_t);
typedef int (*posix_memalign_fn)(void**, size_t, size_t);
typedef void* (*aligned_fn)(size_t, size_t);
typedef void* (*valloc_fn)(size_t);

static struct {
  malloc_fn malloc;
  free_fn free;
  calloc_fn calloc;
  realloc_fn realloc;
  reallocarray_fn reallocarray;
  posix_memalign_fn posix_memalign;
  aligned_fn aligned_alloc;
  aligned_fn memalign;
  valloc_fn valloc;
  valloc_fn pvalloc;
} real;

/* The other names (wire/allocators.h): one generic wrapper each, forwarding
 * five integer arguments (every one of these functions takes at most five,
 * all in integer registers) and reading them as the cookie says. */
typedef uintptr_t (*any_fn)(uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t);
struct interposed {
  const char* name;
  __u64 cookie;
  any_fn real;
  /* Records: its next definition, found at start, is one the uprobe path
   * probes (an operator only where its library has an allocator of its own:
   * libstdc++'s call malloc, which records). Otherwise a jump to it. */
  int records;
  unsigned long long looked_up_at; /* loads seen when a late lookup found nothing */
};
#define MT_TABLE_ENTRY(name, cookie) {#name, cookie, NULL, 0, 0},
static struct interposed others[] = {MT_INTERPOSED_OTHERS(MT_TABLE_ENTRY)};
#define MT_TABLE_INDEX(name, cookie) OTHER_##name,
enum { MT_INTERPOSED_OTHERS(MT_TABLE_INDEX) OTHER_COUNT };

enum { STATE_NEW, STATE_RESOLVING, STATE_RESOLVED };
static int resolve_state = STATE_NEW;
/* Recording: the process is flipped in the kernel and the shared memory is
 * mapped. Read on every call. */
static int active;
static int init_done;
/* Loaded into a running process and attached (memtrack_attach) at least
 * once: the wrappers are reached through rewritten GOT entries. */
static int attached;
static struct mt_shm_header* shm;
static int tsc_clock; /* shm->clock == MT_CLOCK_TSC, read once */
static __u32 own_pid;
/* Each thread's chunk. No TLS of our own: a TLS block would be one more
 * module in every thread's DTV, which pthread_create would calloc bigger. */
static pthread_key_t chunk_key;
/* The thread resolving the real functions: its nested calls use the arena. */
static pthread_t resolver;

/* ------------------------------------------------------------------ arena
 * dlsym may allocate before the real functions are known: those calls get
 * the arena's memory, counted (they reach no allocator, so neither path sees
 * them), and are never freed. */
#define ARENA_BYTES 65536
/* Mapped at its first use, marked as memtrack's own memory for the kernel
 * (MT_OWN_MAPPING_FD): static memory (.bss) would be mapped by the loader
 * as an anonymous mapping counted as the program's. */
static unsigned char* arena;
static size_t arena_used;
static __u64 arena_allocations, arena_bytes;

static int in_arena(const void* p) {
  const unsigned char* base = __atomic_load_n(&arena, __ATOMIC_RELAXED);
  return base && (const unsigned char*)p >= base && (const unsigned char*)p < base + ARENA_BYTES;
}

static unsigned char* arena_base(void) {
  unsigned char* base = __atomic_load_n(&arena, __ATOMIC_ACQUIRE);
  if (base) return base;
  void* mapped = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, MT_OWN_MAPPING_FD, 0);
  if (mapped == MAP_FAILED) return NULL;
  if (!__atomic_compare_exchange_n(&arena, &base, (unsigned char*)mapped, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    munmap(mapped, ARENA_BYTES); /* another thread mapped it first */
    return base;
  }
  return mapped;
}

static void* arena_alloc(size_t size, size_t align) {
  unsigned char* base = arena_base();
  if (!base) return NULL;
  if (align < 16) align = 16;
  size_t start = (__atomic_load_n(&arena_used, __ATOMIC_RELAXED) + align - 1) & ~(align - 1);
  if (size > ARENA_BYTES || start > ARENA_BYTES - size) return NULL;
  __atomic_store_n(&arena_used, start + size, __ATOMIC_RELAXED);
  __atomic_fetch_add(&arena_allocations, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&arena_bytes, size, __ATOMIC_RELAXED);
  return base + start;
}

/* ------------------------------------------------------------------ setup */

/* `&malloc` is the global definition, whoever made it: this is ours. */
__attribute__((visibility("hidden"))) void* own_malloc(size_t size);

static int own_malloc_is_first(void) {
  void* first = dlsym(RTLD_DEFAULT, "malloc");
  if (first == (void*)&own_malloc) return 1;
  /* A non-PIE executable that takes malloc's address has its PLT entry as
   * the canonical address: no definition, dladdr names no malloc there. */
  Dl_info at;
  const ElfW(Sym)* symbol = NULL;
  return dladdr1(first, &at, (void**)&symbol, RTLD_DL_SYMENT) && symbol && symbol->st_shndx == SHN_UNDEF;
}

static const void* object_of(const void* function) {
  Dl_info info;
  return function && dladdr(function, &info) ? info.dli_fbase : NULL;
}

/* A few objects: the allocators a process has. */
struct objects {
  const void* base[64];
  int count;
};

static int has_object(const struct objects* o, const void* function) {
  const void* base = object_of(function);
  for (int i = 0; i < o->count; ++i)
    if (o->base[i] == base) return base != NULL;
  return 0;
}

static void add_object(struct objects* o, const void* function) {
  const void* base = object_of(function);
  if (base && !has_object(o, function) && o->count < (int)(sizeof(o->base) / sizeof(o->base[0])))
    o->base[o->count++] = base;
}

static int is_operator(const struct interposed* f) { return f->name[0] == '_' && f->name[1] == 'Z'; }

/* Looked up once, with the objects loaded at start. Each lookup that finds
 * nothing allocates dlerror's message: from the arena when our malloc is the
 * one dlsym calls; otherwise (another malloc comes first: the process stays
 * with the uprobes, which would record those) they are not looked up. */
static void resolve_others(void) {
  if (!own_malloc_is_first()) return;
  for (int i = 0; i < OTHER_COUNT; ++i) others[i].real = (any_fn)dlsym(RTLD_NEXT, others[i].name);
  /* The objects with allocator entry points of their own, as
   * allocator_symbols.cpp decides whether a file's operators are probed. */
  struct objects allocators = {{0}, 0};
  const void* libc_family[] = {(const void*)real.malloc, (const void*)real.free, (const void*)real.calloc,
                               (const void*)real.realloc};
  for (size_t i = 0; i < sizeof(libc_family) / sizeof(libc_family[0]); ++i) add_object(&allocators, libc_family[i]);
  for (int i = 0; i < OTHER_COUNT; ++i)
    if (!is_operator(&others[i])) add_object(&allocators, (const void*)others[i].real);
  for (int i = 0; i < OTHER_COUNT; ++i) {
    struct interposed* f = &others[i];
    f->records = f->real && (!is_operator(f) || has_object(&allocators, (const void*)f->real));
  }
}

static void resolve(void) {
  int expected = STATE_NEW;
  if (!__atomic_compare_exchange_n(&resolve_state, &expected, STATE_RESOLVING, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    /* Another thread resolves; its nested calls use the arena meanwhile. */
    while (__atomic_load_n(&resolve_state, __ATOMIC_ACQUIRE) != STATE_RESOLVED) sched_yield();
    return;
  }
  resolver = pthread_self();
  real.malloc = (malloc_fn)dlsym(RTLD_NEXT, "malloc");
  real.free = (free_fn)dlsym(RTLD_NEXT, "free");
  real.calloc = (calloc_fn)dlsym(RTLD_NEXT, "calloc");
  real.realloc = (realloc_fn)dlsym(RTLD_NEXT, "realloc");
  real.reallocarray = (reallocarray_fn)dlsym(RTLD_NEXT, "reallocarray");
  real.posix_memalign = (posix_memalign_fn)dlsym(RTLD_NEXT, "posix_memalign");
  real.aligned_alloc = (aligned_fn)dlsym(RTLD_NEXT, "aligned_alloc");
  real.memalign = (aligned_fn)dlsym(RTLD_NEXT, "memalign");
  real.valloc = (valloc_fn)dlsym(RTLD_NEXT, "valloc");
  real.pvalloc = (valloc_fn)dlsym(RTLD_NEXT, "pvalloc");
  resolve_others();
  __atomic_store_n(&resolve_state, STATE_RESOLVED, __ATOMIC_RELEASE);
}

static int resolved(void) { return LIKELY(__atomic_load_n(&resolve_state, __ATOMIC_ACQUIRE) == STATE_RESOLVED); }

/* A call dlsym makes while the real functions are being resolved. */
static int inside_dlsym(void) {
  return UNLIKELY(!resolved()) && __atomic_load_n(&resolve_state, __ATOMIC_ACQUIRE) == STATE_RESOLVING &&
         pthread_equal(pthread_self(), resolver);
}

/* The recorder attaches a uprobe here; its program flips the process in the
 * kernel before this returns, and keeps where the shared memory is (the
 * kernel reads a thread's depth there: mt_shm_chunk). */
EXPORT __attribute__((noinline)) void memtrack_interposer_ready(const struct mt_shm_header* h) {
  __asm__ volatile("" : : "r"(h) : "memory");
}

/* A thread exits (its key was cleared before this runs). */
static void retire_chunk(void* chunk) {
  struct mt_shm_chunk* c = chunk;
  __atomic_store_n(&c->state, MT_CHUNK_RETIRED, __ATOMIC_RELEASE);
}

/* Taken while GOT entries are rewritten (attach, a module loaded, detach). */
static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;

static void after_fork_in_child(void) {
  /* The chunk belongs to the parent's thread; this process claims its own. */
  pthread_setspecific(chunk_key, NULL);
  /* Another thread of the parent may have held it: it has no thread here. */
  pthread_mutex_init(&attach_lock, NULL);
  own_pid = (__u32)syscall(SYS_getpid);
}

/* True when this library's malloc is the one every caller reaches and the
 * next one is glibc's or a known allocator's: otherwise another definition
 * provides malloc, and the uprobes (which see it) keep recording this process. */
static int first_in_scope_before_provider(void) {
  if (!own_malloc_is_first()) return 0;
  Dl_info info;
  if (!dladdr((void*)real.malloc, &info) || !info.dli_fname) return 0;
  const char* base = strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  if (strncmp(base, "libc.so", 7) == 0) return 1;
  /* jemalloc, mimalloc or tcmalloc as a shared library: ours takes its
   * names too. */
  for (int i = 0; i < OTHER_COUNT; ++i) {
    const char* name = others[i].name;
    if ((!strcmp(name, "mallocx") || !strcmp(name, "mi_malloc") || !strcmp(name, "tc_malloc")) &&
        object_of((const void*)others[i].real) == info.dli_fbase)
      return 1;
  }
  return 0;
}

/* The recording's shared memory at `path` when the recorder chose the
 * interposer for this process, else NULL; `*address_limited` says whether an
 * address-space limit was the reason. */
static struct mt_shm_header* map_recording(const char* path, int* address_limited) {
  *address_limited = 0;
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return NULL;
  /* The shared memory, the call paths' table and caches take ~1.1 GB of
   * address space (reserved, touched as used): under an address-space limit
   * the program would run out sooner than untraced. It stays on the
   * uprobes, which take none; counted in the header's page. */
  struct rlimit limit;
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    *address_limited = 1;
    const size_t decisions_end = MT_SHM_DECISIONS_OFFSET + MT_SHM_MAX_PIDS;
    void* head = mmap(NULL, decisions_end, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (head == MAP_FAILED) return NULL;
    struct mt_shm_header* h = head;
    __u32 pid = (__u32)syscall(SYS_getpid);
    if (h->magic == MT_SHM_MAGIC && h->version == MT_SHM_VERSION && pid < MT_SHM_MAX_PIDS &&
        ((volatile __u8*)head)[MT_SHM_DECISIONS_OFFSET + pid] == MT_PATH_INTERPOSER)
      __atomic_fetch_add(&h->address_limited, 1, __ATOMIC_RELAXED);
    munmap(head, decisions_end);
    return NULL;
  }
  void* base = mmap(NULL, mt_shm_size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return NULL;
  struct mt_shm_header* h = base;
  __u32 pid = (__u32)syscall(SYS_getpid);
  if (h->magic != MT_SHM_MAGIC || h->version != MT_SHM_VERSION || pid >= MT_SHM_MAX_PIDS ||
      ((volatile __u8*)base)[MT_SHM_DECISIONS_OFFSET + pid] != MT_PATH_INTERPOSER) {
    munmap(base, mt_shm_size());
    return NULL;
  }
  return h;
}

/* The chunks' thread key and the fork handler, once for the library's life
 * (a process attached again reuses them). Both may allocate: before this
 * process records. Setting a key past the first block allocates: ours must
 * be in it, or claiming a chunk would allocate and recurse. 0: the process
 * cannot be recorded here (counted when the key is past the first block). */
static int prepare_threads(struct mt_shm_header* h) {
  static int prepared;
  if (prepared) return 1;
  if (pthread_key_create(&chunk_key, retire_chunk) != 0) return 0;
  if (chunk_key >= 32 /* PTHREAD_KEY_2NDLEVEL_SIZE */) {
    __atomic_fetch_add(&h->not_interposed, 1, __ATOMIC_RELAXED);
    pthread_key_delete(chunk_key);
    return 0;
  }
  pthread_atfork(NULL, NULL, after_fork_in_child);
  prepared = 1;
  return 1;
}

static void initialise(void) {
  init_done = 1;
  extern char** environ;
  const char* path = NULL;
  for (char** e = environ; e && *e; ++e)
    if (strncmp(*e, MT_SHM_ENV "=", sizeof(MT_SHM_ENV)) == 0) path = *e + sizeof(MT_SHM_ENV);
  if (!path) return;
  int address_limited;
  struct mt_shm_header* h = map_recording(path, &address_limited);
  if (!h) return;
  if (!first_in_scope_before_provider()) {
    __atomic_fetch_add(&h->not_interposed, 1, __ATOMIC_RELAXED);
    munmap(h, mt_shm_size());
    return;
  }
  /* Call paths need the recorder's rule table: without it
   * the kernel's walker keeps the process. */
  if (!mt_stacks_open(h)) {
    __atomic_fetch_add(&h->not_interposed, 1, __ATOMIC_RELAXED);
    munmap(h, mt_shm_size());
    return;
  }
  __atomic_fetch_add(&h->arena_allocations, __atomic_load_n(&arena_allocations, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
  __atomic_fetch_add(&h->arena_bytes, __atomic_load_n(&arena_bytes, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
  if (!prepare_threads(h)) {
    munmap(h, mt_shm_size());
    return;
  }
  own_pid = (__u32)syscall(SYS_getpid);
  tsc_clock = h->clock == MT_CLOCK_TSC;
  shm = h;
  memtrack_interposer_ready(h);
  __atomic_store_n(&active, 1, __ATOMIC_RELEASE);
}

/* Called on every call until the process is set up: once the real functions
 * are known and the environment is there (ld.so calls malloc before libc has
 * set `environ`), the process is set up once. */
static void setup(void) {
  if (!resolved()) resolve();
  extern char** environ;
  /* Calls made while initialising find init_done set: they pass through. */
  if (!init_done && environ) {
    static int initialising;
    if (__atomic_exchange_n(&initialising, 1, __ATOMIC_ACQ_REL) == 0) initialise();
  }
}

/* Also when nothing calls our wrappers (another definition of malloc comes
 * first): the counters then say why this process stayed with the uprobes. */
__attribute__((constructor)) static void set_up_at_load(void) {
  if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE)) setup();
}

/* ------------------------------------------------------------------ events */

static long futex(__u32* word, int op, __u32 value, const struct timespec* timeout) {
  return syscall(SYS_futex, word, op, value, timeout, NULL, 0);
}

static void ring_doorbell(void) {
  __atomic_fetch_add(&shm->doorbell, 1, __ATOMIC_RELEASE);
  futex(&shm->doorbell, FUTEX_WAKE, 1, NULL);
}

/* Attached: the recording is over (the recorder ended it or is gone); the
 * next outer call detaches (still_attached). */
static int detach_wanted;

static void stop_recording(void) {
  if (attached)
    __atomic_store_n(&detach_wanted, 1, __ATOMIC_RELEASE);
  else
    __atomic_store_n(&active, 0, __ATOMIC_RELEASE);
}

static struct mt_shm_chunk* claim_chunk(void) {
  char* base = (char*)shm;
  for (;;) {
    for (__u32 index = 0; index < MT_SHM_CHUNKS; ++index) {
      struct mt_shm_chunk* c = mt_shm_chunk_at(base, index);
      __u32 expected = MT_CHUNK_FREE;
      if (__atomic_load_n(&c->state, __ATOMIC_RELAXED) != MT_CHUNK_FREE) continue;
      if (!__atomic_compare_exchange_n(&c->state, &expected, MT_CHUNK_OWNED, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        continue;
      /* The recorder scans the chunks below chunks_used: raise it first. */
      __u32 used = __atomic_load_n(&shm->chunks_used, __ATOMIC_RELAXED);
      while (used <= index &&
             !__atomic_compare_exchange_n(&shm->chunks_used, &used, index + 1, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
      }
      struct timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      c->pid = own_pid;
      c->tid = (__u32)syscall(SYS_gettid);
      c->depth = 0;
      c->own_work = 0;
      /* Last: until then the recorder sees a claim in progress, never a
       * chunk of a process gone before under the same pid (shm_events.cpp). */
      __atomic_store_n(&c->claimed_ns, (__u64)now.tv_sec * 1000000000ull + (__u64)now.tv_nsec, __ATOMIC_RELEASE);
      if (c->tid < MT_SHM_MAX_PIDS)
        __atomic_store_n((__u16*)(base + MT_SHM_THREADS_OFFSET) + c->tid, (__u16)(index + 1), __ATOMIC_RELEASE);
      pthread_setspecific(chunk_key, c);
      return c;
    }
    /* Every chunk is in use: wait for the recorder to free one. */
    __atomic_fetch_add(&shm->chunk_waits, 1, __ATOMIC_RELAXED);
    if (mt_recording_over(shm)) return NULL;
    ring_doorbell();
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
}

/* Waits until the recorder has drained the chunk below its capacity; false
 * when recording is over meanwhile (ended, or the recorder gone). errno is
 * left as it was: the futex wait sets it (ETIMEDOUT, EAGAIN), and free must
 * keep it. */
static int wait_for_space(struct mt_shm_chunk* c, __u32 head) {
  __atomic_fetch_add(&shm->full_waits, 1, __ATOMIC_RELAXED);
  int saved = errno;
  for (;;) {
    __u32 tail = __atomic_load_n(&c->tail, __ATOMIC_ACQUIRE);
    if (head - tail < MT_SHM_CHUNK_EVENTS || mt_recording_over(shm)) {
      errno = saved;
      return head - tail < MT_SHM_CHUNK_EVENTS;
    }
    __atomic_store_n(&c->waiting, 1, __ATOMIC_SEQ_CST);
    ring_doorbell();
    struct timespec timeout = {0, 100 * 1000000};
    if (__atomic_load_n(&c->tail, __ATOMIC_SEQ_CST) == tail) futex(&c->tail, FUTEX_WAIT, tail, &timeout);
    __atomic_store_n(&c->waiting, 0, __ATOMIC_RELAXED);
  }
}

/* `frame`: the wrapper's frame (__builtin_frame_address), whose caller's
 * call path an allocation carries. */
static void emit(struct mt_shm_chunk* c, void* const* frame, __u32 kind, const void* addr, __u64 size,
                 const void* old_addr) {
  /* The page faults until the event is written are memtrack's own (this
   * thread's, so ordering against the compiler is enough). */
  c->own_work = 1;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  /* Defined before the event, as the kernel defines it at the call's entry. */
  __u64 stack_hash = kind != MT_FREE && mt_stacks_on() ? mt_stack_capture(c, frame) : 0;
  __u32 head = c->head;
  __u32 tail = __atomic_load_n(&c->tail, __ATOMIC_ACQUIRE);
  if (UNLIKELY(head - tail >= MT_SHM_CHUNK_EVENTS) && !wait_for_space(c, head)) {
    c->own_work = 0;
    stop_recording();
    return;
  }
  struct mt_alloc_event* e = &c->events[head & (MT_SHM_CHUNK_EVENTS - 1)];
  e->timestamp = mt_event_time(tsc_clock, kind != MT_FREE);
  e->pid = c->pid;
  e->tid = c->tid;
  e->addr = (__u64)(uintptr_t)addr;
  e->size = size;
  e->old_addr = (__u64)(uintptr_t)old_addr;
  e->stack_hash = stack_hash;
  e->kind = kind;
  e->reserved = 0;
  __atomic_store_n(&c->head, head + 1, __ATOMIC_RELEASE);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  c->own_work = 0;
  /* Half full: ask the recorder to drain well before the thread must wait. */
  if (UNLIKELY(head + 1 - tail == MT_SHM_CHUNK_EVENTS / 2)) ring_doorbell();
  /* Attached, a killed recorder never ends the recording: asked now and
   * then (a syscall), the next call then detaches. */
  if (UNLIKELY(attached) && UNLIKELY((head & 4095) == 0) && mt_recording_over(shm)) stop_recording();
}

/* ------------------------------------------------------------------ wrappers
 * Each allocation records after the real call returns, the way the return
 * probe does: the block's address is known then; each free before the real
 * call, the way the entry probe does. Inner calls (a wrapper entered inside
 * another: the chunk's depth) record nothing. */

struct call {
  struct mt_shm_chunk* chunk; /* NULL: not recording */
  int outer;
};

/* A thread's key may hold a chunk of an earlier recording when attached
 * again: detach_from_process replaced that memory, outside the current one. */
static int in_current_recording(const struct mt_shm_chunk* c) {
  return (const char*)c >= (const char*)shm && (const char*)c < (const char*)shm + mt_shm_size();
}

static struct mt_shm_chunk* thread_chunk(void) {
  struct mt_shm_chunk* c = pthread_getspecific(chunk_key);
  if (UNLIKELY(!c) || (UNLIKELY(attached) && UNLIKELY(!in_current_recording(c)))) {
    c = claim_chunk();
    if (!c) stop_recording();
  }
  return c;
}

static int still_attached(struct call* call);

static inline struct call enter(void) {
  struct call call = {NULL, 0};
  if (UNLIKELY(!__atomic_load_n(&active, __ATOMIC_ACQUIRE))) {
    setup();
    if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE)) return call;
  }
  call.chunk = thread_chunk();
  if (call.chunk) call.outer = call.chunk->depth++ == 0;
  if (UNLIKELY(attached) && !still_attached(&call)) call.chunk = NULL;
  return call;
}

/* Whether the call records, after the real call returned (allocations) or
 * before it (frees: the kernel decides those at entry). A call another thread
 * began before the process became ready, and that ends after, is left by the
 * kernel to us and seen too late here: counted, never silently. */
static inline int recording(const struct call* call, int is_free) {
  if (LIKELY(call->chunk != NULL)) {
    /* An inner call while the thread writes an event: a signal handler's
     * (run_program_handler leaves its calls inner ones then). */
    if (UNLIKELY(!call->outer) && UNLIKELY(call->chunk->own_work))
      __atomic_fetch_add(is_free ? &shm->handler_frees_dropped : &shm->handler_allocations_dropped, 1,
                         __ATOMIC_RELAXED);
    return call->outer && __atomic_load_n(&active, __ATOMIC_RELAXED);
  }
  /* Attached to a running process, such a call began before the recording
   * (in a wrapper left from an earlier one): nothing the kernel left to us. */
  if (UNLIKELY(__atomic_load_n(&active, __ATOMIC_ACQUIRE)) && !attached)
    __atomic_fetch_add(&shm->calls_at_ready_lost, 1, __ATOMIC_RELAXED);
  return 0;
}

/* Saturates: an exception thrown inside a call has reset the depth
 * (forget_calls_in_progress) and the call may still return (caught inside). */
static inline void leave(const struct call* call) {
  if (call->chunk && call->chunk->depth) call->chunk->depth--;
}

#define ENTER() struct call call = enter()
#define RECORDING() recording(&call, 0)
#define RECORDING_FREE() recording(&call, 1)
/* In the wrapper itself: its frame is where the caller's path starts. */
#define EMIT(...) emit(call.chunk, __builtin_frame_address(0), __VA_ARGS__)

EXPORT void* malloc(size_t size) {
  if (inside_dlsym())
    return arena_alloc(size, 16);
  ENTER();
  void* p = real.malloc(size);
  if (RECORDING() && p) EMIT(MT_MALLOC, p, size, NULL);
  leave(&call);
  return p;
}

EXPORT void free(void* p) {
  if (UNLIKELY(!p || in_arena(p))) return;
  ENTER();
  /* Recorded at its entry, as the kernel records a free (no return probe):
   * once the block is back in the allocator, another thread's malloc may
   * get it, and its event must come after. */
  if (RECORDING_FREE()) EMIT(MT_FREE, p, 0, NULL);
  real.free(p);
  leave(&call);
}

EXPORT void* calloc(size_t count, size_t size) {
  if (inside_dlsym()) {
    size_t bytes;
    if (__builtin_mul_overflow(count, size, &bytes)) return NULL;
    return arena_alloc(bytes, 16); /* the arena is never reused: still zero */
  }
  ENTER();
  void* p = real.calloc(count, size);
  if (RECORDING() && p) EMIT(MT_CALLOC, p, (__u64)count * size, NULL);
  leave(&call);
  return p;
}

static void record_resize(struct mt_shm_chunk* c, void* const* frame, void* p, void* old, __u64 size) {
  if (p)
    emit(c, frame, MT_REALLOC, p, size, old);
  else if (size == 0 && old)
    emit(c, frame, MT_FREE, old, 0, NULL); /* glibc's realloc(p, 0) frees p */
}

EXPORT void* realloc(void* old, size_t size) {
  if (UNLIKELY(old && in_arena(old))) {
    /* A block of the arena moves to the real allocator as a new one. */
    size_t available = (size_t)(__atomic_load_n(&arena, __ATOMIC_RELAXED) + ARENA_BYTES - (unsigned char*)old);
    void* p = malloc(size);
    if (p) memcpy(p, old, size < available ? size : available);
    return p;
  }
  ENTER();
  void* p = real.realloc(old, size);
  if (RECORDING()) record_resize(call.chunk, __builtin_frame_address(0), p, old, size);
  leave(&call);
  return p;
}

EXPORT void* reallocarray(void* old, size_t count, size_t size) {
  ENTER();
  void* p = real.reallocarray(old, count, size);
  if (RECORDING()) record_resize(call.chunk, __builtin_frame_address(0), p, old, (__u64)count * size);
  leave(&call);
  return p;
}

EXPORT int posix_memalign(void** out, size_t alignment, size_t size) {
  ENTER();
  int r = real.posix_memalign(out, alignment, size);
  if (RECORDING() && r == 0) EMIT(MT_ALIGNED_ALLOC, *out, size, NULL);
  leave(&call);
  return r;
}

EXPORT void* aligned_alloc(size_t alignment, size_t size) {
  ENTER();
  void* p = real.aligned_alloc(alignment, size);
  if (RECORDING() && p) EMIT(MT_ALIGNED_ALLOC, p, size, NULL);
  leave(&call);
  return p;
}

EXPORT void* memalign(size_t alignment, size_t size) {
  if (inside_dlsym())
    return arena_alloc(size, alignment);
  ENTER();
  void* p = real.memalign(alignment, size);
  if (RECORDING() && p) EMIT(MT_ALIGNED_ALLOC, p, size, NULL);
  leave(&call);
  return p;
}

EXPORT void* valloc(size_t size) {
  ENTER();
  void* p = real.valloc(size);
  if (RECORDING() && p) EMIT(MT_ALIGNED_ALLOC, p, size, NULL);
  leave(&call);
  return p;
}

EXPORT void* pvalloc(size_t size) {
  ENTER();
  void* p = real.pvalloc(size);
  if (RECORDING() && p) EMIT(MT_ALIGNED_ALLOC, p, size, NULL);
  leave(&call);
  return p;
}

/* ------------------------------------------------------------------ attached to a running process
 * memtrack_attach runs in a thread the recorder stopped where it holds no
 * allocator or loader lock (src/record/process/remote_call.cpp), while the
 * other threads run on. The GOT entries of the names below, in every loaded
 * module, then point at the wrappers; a module dlopened later gets the same
 * once the loader has relocated it; when the recording is over the first
 * outer call puts every entry back. The library stays loaded, idle. */

/* Each wrapper's own address (its global name is glibc's, seen from here). */
#define OWN_ALIAS(name, cookie) \
  __attribute__((visibility("hidden"))) __typeof__(name) own_##name __attribute__((alias(#name), copy(name)));
MT_INTERPOSED_LIBC(OWN_ALIAS)

typedef void* (*dlopen_fn)(const char*, int);
__attribute__((used)) static dlopen_fn real_dlopen;
/* Rescans left until the modules loaded since are relocated and redirected. */
__attribute__((used)) static int modules_pending;
#define RESCANS_AFTER_DLOPEN 64

/* dlopen finds its caller's search path and namespace by its return address:
 * a jump, not a call, leaves the program's there. */
__attribute__((visibility("hidden"))) void* attached_dlopen(const char* file, int mode);
__asm__(".text\n"
        ".globl attached_dlopen\n"
        ".hidden attached_dlopen\n"
        ".type attached_dlopen, @function\n"
        "attached_dlopen:\n"
        "  movl $" "64" ", modules_pending(%rip)\n"
        "  jmp *real_dlopen(%rip)\n"
        ".size attached_dlopen, .-attached_dlopen\n");
_Static_assert(RESCANS_AFTER_DLOPEN == 64, "attached_dlopen's immediate");

/* glibc's names, then its other names of the same functions (the uprobe
 * path sees one site for both: allocator_symbols.cpp), then dlopen. */
#define GOT_NAME(name, cookie) {#name, (void*)own_##name, NULL},
static struct mt_got_name got_names[] = {MT_INTERPOSED_LIBC(GOT_NAME)
                                         {"__libc_malloc", (void*)own_malloc, NULL},
                                         {"__libc_calloc", (void*)own_calloc, NULL},
                                         {"__libc_realloc", (void*)own_realloc, NULL},
                                         {"__libc_free", (void*)own_free, NULL},
                                         {"__libc_memalign", (void*)own_memalign, NULL},
                                         {"__libc_valloc", (void*)own_valloc, NULL},
                                         {"__libc_pvalloc", (void*)own_pvalloc, NULL},
                                         {"__posix_memalign", (void*)own_posix_memalign, NULL},
                                         {"dlopen", (void*)attached_dlopen, NULL}};
#define GOT_NAMES (sizeof(got_names) / sizeof(got_names[0]))

/* What the entries hold: the definitions the real functions are. An alias
 * that is not the same function is left alone (its entries never match). */
static void fill_got_names(void) {
  const void* reals[] = {
#define REAL_OF(name, cookie) (const void*)real.name,
      MT_INTERPOSED_LIBC(REAL_OF)(const void*) real.malloc, (const void*)real.calloc, (const void*)real.realloc,
      (const void*)real.free, (const void*)real.memalign, (const void*)real.valloc, (const void*)real.pvalloc,
      (const void*)real.posix_memalign, (const void*)real_dlopen};
  _Static_assert(sizeof(reals) / sizeof(reals[0]) == GOT_NAMES, "one definition per name");
  for (size_t i = 0; i < GOT_NAMES; ++i) {
    void* defined = dlsym(RTLD_DEFAULT, got_names[i].name);
    got_names[i].real = defined == reals[i] ? (void*)reals[i] : NULL;
  }
}

/* Modules dlopened since the last look: redirected once relocated. Another
 * thread doing it meanwhile is enough. */
static __attribute__((noinline)) void redirect_loaded_modules(void) {
  if (pthread_mutex_trylock(&attach_lock) != 0) return;
  if (__atomic_load_n(&active, __ATOMIC_ACQUIRE) && !__atomic_load_n(&detach_wanted, __ATOMIC_ACQUIRE)) {
    int unrelocated = 0;
    mt_got_redirect(got_names, GOT_NAMES, (const void*)own_malloc, &unrelocated);
    int left = __atomic_load_n(&modules_pending, __ATOMIC_RELAXED);
    __atomic_store_n(&modules_pending, unrelocated && left > 0 ? left - 1 : 0, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&attach_lock);
}

/* Whether the chunks of this process's threads but the caller's are out of
 * every wrapper, waiting up to `ms` for them. */
static int threads_left_wrappers(__u32 own_tid, int ms) {
  char* base = (char*)shm;
  for (int waited = 0;; ++waited) {
    int busy = 0;
    __u32 used = __atomic_load_n(&shm->chunks_used, __ATOMIC_ACQUIRE);
    for (__u32 i = 0; i < used && i < MT_SHM_CHUNKS && !busy; ++i) {
      struct mt_shm_chunk* c = mt_shm_chunk_at(base, i);
      busy = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == MT_CHUNK_OWNED && c->pid == own_pid &&
             c->tid != own_tid && __atomic_load_n(&c->depth, __ATOMIC_SEQ_CST) != 0;
    }
    if (!busy) return 1;
    if (waited >= ms) return 0;
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
}

/* The recording is over: every GOT entry back, then, once no thread is
 * inside a wrapper, the shared memory replaced by untouched private memory
 * (a thread that read `active` before it was cleared may still touch its
 * chunk, and finds nothing there). Counted in the header first, for the
 * recorder. */
static void detach_from_process(void) {
  if (pthread_mutex_trylock(&attach_lock) != 0) return;
  if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE)) {
    pthread_mutex_unlock(&attach_lock);
    return;
  }
  mt_got_restore(got_names, GOT_NAMES, (const void*)own_malloc);
  __atomic_store_n(&active, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&modules_pending, 0, __ATOMIC_RELAXED);
  __u32 own_tid = (__u32)syscall(SYS_gettid);
  if (threads_left_wrappers(own_tid, 200)) {
    __atomic_fetch_add(&shm->detached, 1, __ATOMIC_RELEASE);
    mt_stacks_close();
    mmap(shm, mt_shm_size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
         MT_OWN_MAPPING_FD, 0);
  } else {
    /* A thread stopped inside a wrapper: both stay mapped for it. */
    __atomic_fetch_add(&shm->detached, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&attach_lock);
}

/* Attached: whether this call records. The detach clears `active`, then
 * waits for every thread's depth to drop to 0 before it replaces the
 * shared memory: a thread raises its depth first (enter), then looks, with a
 * full barrier between. */
static int still_attached(struct call* call) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (LIKELY(__atomic_load_n(&active, __ATOMIC_RELAXED)) && LIKELY(call->chunk) &&
      LIKELY(!__atomic_load_n(&detach_wanted, __ATOMIC_RELAXED)) &&
      LIKELY(!__atomic_load_n(&shm->ended, __ATOMIC_RELAXED))) {
    if (UNLIKELY(__atomic_load_n(&modules_pending, __ATOMIC_RELAXED))) redirect_loaded_modules();
    return 1;
  }
  if (call->chunk) call->chunk->depth--;
  if (call->outer || !call->chunk) detach_from_process();
  return 0;
}

/* Whether glibc's malloc is the one every module reaches: otherwise the
 * program or a preloaded library defines its own, whose calls inside its
 * own module no GOT entry shows. */
static int glibc_malloc_is_global(void) {
  void* global = dlsym(RTLD_DEFAULT, "malloc");
  Dl_info info;
  if (global != (void*)real.malloc || !dladdr(global, &info) || !info.dli_fname) return 0;
  const char* base = strrchr(info.dli_fname, '/');
  return strncmp(base ? base + 1 : info.dli_fname, "libc.so", 7) == 0;
}

EXPORT int memtrack_detach(void) {
  if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE) || !attached) return MT_ATTACH_OK;
  if (!mt_recording_over(shm)) return MT_ATTACH_BUSY;
  detach_from_process();
  return MT_ATTACH_OK;
}

EXPORT int memtrack_attach(const char* events_path, const char* stacks_path) {
  pthread_mutex_lock(&attach_lock);
  int result = MT_ATTACH_OK;
  if (__atomic_load_n(&active, __ATOMIC_ACQUIRE)) {
    /* An earlier recording no call has detached from yet (the process was
     * idle since it ended), or one still running. */
    if (!detach_wanted && !mt_recording_over(shm)) {
      pthread_mutex_unlock(&attach_lock);
      return MT_ATTACH_BUSY;
    }
    pthread_mutex_unlock(&attach_lock);
    detach_from_process();
    pthread_mutex_lock(&attach_lock);
  }
  int address_limited;
  struct mt_shm_header* h = map_recording(events_path, &address_limited);
  if (!h) {
    result = address_limited ? MT_ATTACH_ADDRESS_LIMITED : MT_ATTACH_NO_RECORDING;
  } else if (!glibc_malloc_is_global()) {
    __atomic_fetch_add(&h->not_interposed, 1, __ATOMIC_RELAXED);
    result = MT_ATTACH_OTHER_MALLOC;
  } else if (!mt_stacks_open_at(h, stacks_path)) {
    __atomic_fetch_add(&h->not_interposed, 1, __ATOMIC_RELAXED);
    result = MT_ATTACH_NO_STACKS;
  } else if (!prepare_threads(h)) {
    mt_stacks_close();
    result = MT_ATTACH_NO_KEY;
  }
  if (result != MT_ATTACH_OK) {
    if (h) munmap(h, mt_shm_size());
    pthread_mutex_unlock(&attach_lock);
    return result;
  }
  real_dlopen = (dlopen_fn)dlsym(RTLD_DEFAULT, "dlopen");
  fill_got_names();
  own_pid = (__u32)syscall(SYS_getpid);
  tsc_clock = h->clock == MT_CLOCK_TSC;
  shm = h;
  attached = 1;
  __atomic_store_n(&detach_wanted, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&active, 1, __ATOMIC_SEQ_CST);
  memtrack_interposer_ready(h);
  mt_got_redirect(got_names, GOT_NAMES, (const void*)own_malloc, NULL);
  pthread_mutex_unlock(&attach_lock);
  return MT_ATTACH_OK;
}

/* ------------------------------------------------------------------ the other names
 * Each exported wrapper jumps (a sibling call: no frame of ours on the stack)
 * either to record_call, whose frame then stands where the wrapper's would,
 * or to the next definition. */

#define ARGS uintptr_t a0, uintptr_t a1, uintptr_t a2, uintptr_t a3, uintptr_t a4
#define PASS a0, a1, a2, a3, a4

static inline uintptr_t argument(const uintptr_t* args, __u32 index) { return index < 5 ? args[index] : 0; }

/* As alloc.bpf.c records a probed call: allocations at their return, frees
 * decided at their entry, nothing for inner calls. */
static __attribute__((noinline)) uintptr_t record_call(ARGS, const struct interposed* f) {
  const uintptr_t args[5] = {PASS};
  __u64 cookie = f->cookie;
  __u32 kind = MT_COOKIE_KIND(cookie);
  const void* ptr = (const void*)argument(args, MT_COOKIE_PTR_ARG(cookie));
  if (kind == MT_FREE && UNLIKELY(in_arena(ptr))) return 0;
  ENTER();
  if (kind == MT_FREE) {
    /* At its entry, as free(). */
    if (RECORDING_FREE() && ptr) EMIT(MT_FREE, ptr, 0, NULL);
    uintptr_t r = f->real(PASS);
    leave(&call);
    return r;
  }
  __u64 size = argument(args, MT_COOKIE_SIZE_ARG(cookie));
  if (MT_COOKIE_COUNT_ARG(cookie) != MT_ARG_NONE) size *= argument(args, MT_COOKIE_COUNT_ARG(cookie));
  uintptr_t r = f->real(PASS);
  if (RECORDING()) {
    const void* block = (const void*)r;
    int failed = 0;
    if (MT_COOKIE_OUT_ARG(cookie) != MT_ARG_NONE) {
      failed = (int)r != 0;
      block = failed ? NULL : *(void* const*)argument(args, MT_COOKIE_OUT_ARG(cookie));
    }
    if (block)
      EMIT(kind, block, size, kind == MT_REALLOC ? ptr : NULL);
    else if (!failed && kind == MT_REALLOC && size == 0 && ptr)
      EMIT(MT_FREE, ptr, 0, NULL); /* realloc(p, 0) returning NULL has freed p */
  }
  leave(&call);
  return r;
}

static int count_loads(struct dl_phdr_info* info, size_t size, void* out) {
  (void)size;
  *(unsigned long long*)out = info->dlpi_adds;
  return 1;
}

struct late_lookup {
  const char* name;
  void* found;
};

/* The first object, in load order, whose own scope (itself and its
 * dependencies, as for its own references) defines the name. */
static int find_in_object(struct dl_phdr_info* info, size_t size, void* out) {
  (void)size;
  struct late_lookup* lookup = out;
  if (!info->dlpi_name || !info->dlpi_name[0]) return 0;
  void* handle = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
  if (!handle) return 0;
  void* found = dlsym(handle, lookup->name);
  dlclose(handle);
  if (!found || object_of(found) == object_of((const void*)&own_malloc)) return 0;
  lookup->found = found;
  return 1;
}

/* No definition was found at start: a library loaded since may have one (a C
 * program dlopening a C++ library: libstdc++ comes in the library's local
 * scope, which RTLD_NEXT does not search, and its references to the
 * operators reach ours first). Looked up again only when objects were loaded
 * since the last try; the lookup's own allocations (dlopen's, dlerror's
 * messages, freed before it returns) run as an inner call, which records
 * nothing. */
static __attribute__((noinline)) any_fn late_definition(struct interposed* f) {
  unsigned long long loads = 0;
  dl_iterate_phdr(count_loads, &loads);
  if (__atomic_load_n(&f->looked_up_at, __ATOMIC_RELAXED) == loads) return NULL;
  struct call call = enter();
  struct late_lookup lookup = {f->name, NULL};
  dl_iterate_phdr(find_in_object, &lookup);
  /* The first call returns the last failure's message, the second frees it. */
  dlerror();
  dlerror();
  leave(&call);
  any_fn found = (any_fn)lookup.found;
  if (found)
    __atomic_store_n(&f->real, found, __ATOMIC_RELEASE);
  else
    __atomic_store_n(&f->looked_up_at, loads, __ATOMIC_RELAXED);
  return found;
}

/* A name nothing else defines (a weak reference resolved to ours, a C23 or
 * BSD name glibc lacks): frees free, allocations fail. */
static __attribute__((noinline)) uintptr_t undefined_call(ARGS, const struct interposed* f) {
  const uintptr_t args[5] = {PASS};
  __u64 cookie = f->cookie;
  if (MT_COOKIE_KIND(cookie) == MT_FREE) {
    free((void*)argument(args, MT_COOKIE_PTR_ARG(cookie)));
    return 0;
  }
  if (MT_COOKIE_OUT_ARG(cookie) != MT_ARG_NONE) return ENOMEM;
  errno = ENOMEM;
  return 0;
}

static __attribute__((noinline)) uintptr_t pass_call(ARGS, struct interposed* f) {
  if (UNLIKELY(!__atomic_load_n(&active, __ATOMIC_ACQUIRE))) {
    setup();
    if (f->records && __atomic_load_n(&active, __ATOMIC_ACQUIRE)) return record_call(PASS, f);
  }
  any_fn next = __atomic_load_n(&f->real, __ATOMIC_ACQUIRE);
  if (UNLIKELY(!next)) next = late_definition(f);
  if (UNLIKELY(!next)) return undefined_call(PASS, f);
  return next(PASS);
}

#define MT_WRAPPER(name, cookie)                                                 \
  EXPORT uintptr_t name(ARGS) {                                                  \
    struct interposed* f = &others[OTHER_##name];                                \
    if (LIKELY(f->records) && LIKELY(__atomic_load_n(&active, __ATOMIC_ACQUIRE))) \
      return record_call(PASS, f);                                               \
    return pass_call(PASS, f);                                                   \
  }
MT_INTERPOSED_OTHERS(MT_WRAPPER)

/* A C++ exception begins: one thrown inside a call (bad_alloc from jemalloc's
 * or tcmalloc's operator new) unwinds past record_call, whose depth would
 * stay counted. As on_unwind does in the kernel, the thread's calls in
 * progress are forgotten: the failed call records nothing, the exception's
 * own allocation and everything after records. A jump to the real one. */
typedef void* (*allocate_exception_fn)(size_t);
static allocate_exception_fn next_allocate_exception;

/* The next definition of a name this library takes besides the allocators,
 * looked up at its first call. */
static void* next_definition(void** slot, const char* name) {
  void* next = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (UNLIKELY(!next)) {
    next = dlsym(RTLD_NEXT, name);
    __atomic_store_n(slot, next, __ATOMIC_RELEASE);
  }
  return next;
}

static void forget_calls_in_progress(void) {
  if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE)) return;
  struct mt_shm_chunk* c = pthread_getspecific(chunk_key);
  if (c) c->depth = 0;
}

EXPORT void* __cxa_allocate_exception(size_t size) {
  forget_calls_in_progress();
  /* libstdc++ defines it wherever anything throws. */
  allocate_exception_fn next = next_definition((void**)&next_allocate_exception, "__cxa_allocate_exception");
  return next(size);
}

/* ------------------------------------------------------------------ signal handlers
 * A handler's allocator calls are calls of their own, not inner calls of the
 * wrapper it interrupted: the program's handlers are installed behind a
 * trampoline that runs them with the thread's depth at 0 and puts it back
 * after. A handler that interrupts the write of an event (own_work: the walk
 * of its call path, whose caches are the thread's, or the ring's next slot,
 * taken) keeps the depth: its calls are counted as dropped (recording).
 * A handler that leaves by longjmp leaves the depth at 0, right for the
 * wrapper it abandoned. The trampoline allocates nothing and takes no lock. */
typedef void (*signal_handler)(int);
typedef void (*siginfo_handler)(int, siginfo_t*, void*);
typedef int (*sigaction_fn)(int, const struct sigaction*, struct sigaction*);
typedef signal_handler (*signal_fn)(int, signal_handler);

/* The handler the program installed for each signal, behind a trampoline. */
static uintptr_t program_handlers[NSIG];

static void run_program_handler(int sig, siginfo_t* info, void* context, int with_info) {
  struct mt_shm_chunk* c = __atomic_load_n(&shm, __ATOMIC_ACQUIRE) ? pthread_getspecific(chunk_key) : NULL;
  int own_calls = c && !c->own_work;
  __u32 interrupted_depth = own_calls ? c->depth : 0;
  if (own_calls) c->depth = 0;
  uintptr_t handler = __atomic_load_n(&program_handlers[sig], __ATOMIC_ACQUIRE);
  if (handler && with_info)
    ((siginfo_handler)handler)(sig, info, context);
  else if (handler)
    ((signal_handler)handler)(sig);
  if (own_calls) c->depth = interrupted_depth;
}

static void plain_trampoline(int sig) { run_program_handler(sig, NULL, NULL, 0); }
static void siginfo_trampoline(int sig, siginfo_t* info, void* context) { run_program_handler(sig, info, context, 1); }

static int is_trampoline(signal_handler handler) {
  return handler == plain_trampoline || (uintptr_t)handler == (uintptr_t)siginfo_trampoline;
}

/* SIG_DFL, SIG_IGN, SIG_HOLD (sigset) and SIG_ERR pass through. */
static int is_function(signal_handler handler) {
  return handler != SIG_DFL && handler != SIG_IGN && handler != SIG_HOLD && handler != SIG_ERR;
}

EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  static sigaction_fn next_sigaction;
  sigaction_fn next = next_definition((void**)&next_sigaction, "sigaction");
  if (sig <= 0 || sig >= NSIG) return next(sig, act, old); /* its EINVAL */
  uintptr_t previous = __atomic_load_n(&program_handlers[sig], __ATOMIC_ACQUIRE);
  struct sigaction through;
  if (act && is_function(act->sa_handler)) {
    through = *act;
    if (act->sa_flags & SA_SIGINFO)
      through.sa_sigaction = siginfo_trampoline;
    else
      through.sa_handler = plain_trampoline;
    __atomic_store_n(&program_handlers[sig], (uintptr_t)act->sa_handler, __ATOMIC_RELEASE);
    act = &through;
  }
  int result = next(sig, act, old);
  if (result != 0 && act == &through) __atomic_store_n(&program_handlers[sig], previous, __ATOMIC_RELEASE);
  /* The program gets its own handler back, never the trampoline. */
  if (result == 0 && old && is_trampoline(old->sa_handler)) old->sa_handler = (signal_handler)previous;
  return result;
}

EXPORT int __sigaction(int sig, const struct sigaction* act, struct sigaction* old)
    __attribute__((alias("sigaction"), copy(sigaction)));

/* signal() and its relatives: glibc's call its sigaction inside libc, past
 * ours, so each is taken with its own semantics kept. */
static signal_handler install_behind_trampoline(signal_fn next, int sig, signal_handler handler) {
  if (!next) {
    errno = ENOSYS;
    return SIG_ERR;
  }
  if (sig <= 0 || sig >= NSIG) return next(sig, handler);
  uintptr_t previous = __atomic_load_n(&program_handlers[sig], __ATOMIC_ACQUIRE);
  signal_handler installed = handler;
  if (is_function(handler)) {
    __atomic_store_n(&program_handlers[sig], (uintptr_t)handler, __ATOMIC_RELEASE);
    installed = plain_trampoline;
  }
  signal_handler old = next(sig, installed);
  if (old == SIG_ERR && installed != handler) __atomic_store_n(&program_handlers[sig], previous, __ATOMIC_RELEASE);
  return is_trampoline(old) ? (signal_handler)previous : old;
}

#define MT_SIGNAL_WRAPPER(name)                                                        \
  EXPORT signal_handler name(int sig, signal_handler handler) {                        \
    static signal_fn next_##name;                                                      \
    return install_behind_trampoline(next_definition((void**)&next_##name, #name), sig, handler); \
  }
MT_SIGNAL_WRAPPER(signal)
MT_SIGNAL_WRAPPER(bsd_signal)
MT_SIGNAL_WRAPPER(ssignal)
MT_SIGNAL_WRAPPER(sysv_signal)
MT_SIGNAL_WRAPPER(__sysv_signal)
MT_SIGNAL_WRAPPER(sigset)
