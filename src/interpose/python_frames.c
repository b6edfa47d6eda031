/* CPython's frames, read by the allocating thread from its own interpreter
 * (docs/ARCHITECTURE.md, "Python frames").
 *
 * Found, never guessed: the interpreter is the process's `Py_Version`
 * symbol (3.11 on; an older CPython is known by `_PyRuntime` alone and
 * refused), looked up in the loaded objects' dynamic symbol tables (dlsym
 * would allocate, in the program's name, for each symbol it misses), and the layout is a table per minor version, checked at start
 * against the binary itself: the code type's size, name and member table
 * (the offsets of co_filename, co_name, co_qualname, co_linetable,
 * co_firstlineno), and at each read the thread state's own thread id and
 * interpreter. A version without a table, or a check that fails, leaves the
 * process with native frames only, counted for the report's note.
 *
 * Reads stay bounded: the thread state comes from the interpreter
 * (PyGILState_GetThisThreadState); an eval loop's _PyCFrame must lie on the
 * thread's stack (or be the thread state's root one); a frame must lie in
 * the thread's live data stack, else (a generator's, inside its object) it
 * is copied with process_vm_readv, which fails instead of faulting; a code
 * object must have the code type and its instruction pointer must lie in its
 * code. A code object is read once per process, with process_vm_readv too,
 * when a path first names it; afterwards its identity is taken from its
 * header by plain loads: a frame of the live chain holds a reference to its
 * code object. Anything out of bounds ends the Python part of the path. */
#define _GNU_SOURCE
#include "python_frames.h"
#include "python_layouts.h"
#include "wire/python_line_table.h"

#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* Object headers every version shares: ob_type at 8, ob_size at 16; a
 * type's tp_name at 24, tp_basicsize at 32, tp_members at 240; a compact
 * string's length at 16, state at 32, ASCII data at 48, UTF-8 length and
 * pointer at 48 and 56, other data at 72; a bytes object's data at 32. */
#define OB_TYPE 8
#define OB_SIZE 16
#define TP_NAME 24
#define TP_BASICSIZE 32
#define TP_MEMBERS 240
#define MEMBER_DEF_SIZE 40 /* PyMemberDef: name, type, offset, flags, doc */
#define T_INT 1
#define T_OBJECT 6
#define STR_LENGTH 16
#define STR_STATE 32
#define STR_ASCII_DATA 48
#define STR_UTF8_LENGTH 48
#define STR_UTF8 56
#define STR_DATA 72
#define BYTES_DATA 32
#define MAX_STACK_CHUNKS 16
#define CODE_SLOTS (1u << 15) /* code objects a process defines before it repeats definitions */
#define CODE_PROBES 32u

typedef void* (*tstate_fn)(void);
typedef void* (*interp_fn)(void);

static const struct python_layout* layout;
static struct mt_stacks_header* counters;
static tstate_fn this_thread_state;
static interp_fn main_interpreter;
static __u64 code_type, unicode_type, bytes_type;
/* Mixed into code identities: a code object's address means another code
 * in another program (an exec starts over with another salt). */
static __u64 salt;
/* The code identities this process has defined (a fork's child inherits
 * them with the salt). */
static __u64* defined_codes;

static inline __u64 load64(__u64 address) { return *(const volatile __u64*)(uintptr_t)address; }

static inline int plausible(__u64 address) { return address >= 65536 && address < (1ull << 47) && !(address & 7); }

/* Copies `size` bytes at `address` of this process; 0 where they are not
 * all readable (no fault: the kernel checks). */
static int copy_checked(__u32 pid, __u64 address, void* to, size_t size) {
  if (address < 65536 || address >= (1ull << 47)) return 0;
  struct iovec local = {to, size};
  struct iovec remote = {(void*)(uintptr_t)address, size};
  return syscall(SYS_process_vm_readv, pid, &local, 1ul, &remote, 1ul, 0ul) == (long)size;
}

/* ------------------------------------------------------------------ symbols */

struct symbol_search {
  const char* name;
  __u32 hash; /* GNU hash of the name */
  void* found;
};

static __u32 gnu_hash(const char* name) {
  __u32 h = 5381;
  for (; *name; ++name) h = h * 33 + (unsigned char)*name;
  return h;
}

/* A dynamic section's address: ld.so relocates them in place, but not the
 * vDSO's. */
static uintptr_t dynamic_address(const struct dl_phdr_info* info, ElfW(Addr) value) {
  return value < info->dlpi_addr ? info->dlpi_addr + value : value;
}

/* Looks the name up in one loaded object's GNU hash table (every object of
 * a Debian system has one; an object without is passed over). */
static int search_object(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct symbol_search* search = data;
  const ElfW(Dyn)* dynamic = NULL;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dynamic = (const ElfW(Dyn)*)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dynamic) return 0;
  const ElfW(Sym)* symbols = NULL;
  const char* strings = NULL;
  const __u32* table = NULL;
  for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_SYMTAB) symbols = (const ElfW(Sym)*)dynamic_address(info, d->d_un.d_ptr);
    if (d->d_tag == DT_STRTAB) strings = (const char*)dynamic_address(info, d->d_un.d_ptr);
    if (d->d_tag == DT_GNU_HASH) table = (const __u32*)dynamic_address(info, d->d_un.d_ptr);
  }
  if (!symbols || !strings || !table) return 0;
  __u32 buckets = table[0], first = table[1], bloom_words = table[2], shift = table[3];
  if (buckets == 0 || bloom_words == 0) return 0;
  const __u64* bloom = (const __u64*)(table + 4);
  const __u32* bucket = (const __u32*)(bloom + bloom_words);
  const __u32* chain = bucket + buckets;
  __u32 h = search->hash;
  __u64 bits = (1ull << (h % 64)) | (1ull << ((h >> shift) % 64));
  if ((bloom[(h / 64) % bloom_words] & bits) != bits) return 0;
  for (__u32 i = bucket[h % buckets]; i >= first; ++i) {
    __u32 chained = chain[i - first];
    const ElfW(Sym)* symbol = &symbols[i];
    if ((chained | 1) == (h | 1) && symbol->st_shndx != SHN_UNDEF && strcmp(strings + symbol->st_name, search->name) == 0) {
      search->found = (void*)(info->dlpi_addr + symbol->st_value);
      return 1;
    }
    if (chained & 1) break;
  }
  return 0;
}

/* The first definition of `name` among the loaded objects, as
 * dlsym(RTLD_DEFAULT) finds it; NULL when none. */
static void* find_symbol(const char* name) {
  struct symbol_search search = {name, gnu_hash(name), NULL};
  dl_iterate_phdr(search_object, &search);
  return search.found;
}

/* ------------------------------------------------------------------ layout */

/* The code type's member `name` has type `type` at `offset`. */
static int member_at(const __u8* members, const char* name, int type, __u32 offset) {
  for (int i = 0; i < 40; ++i) {
    const __u8* m = members + i * MEMBER_DEF_SIZE;
    const char* member_name = *(const char* const*)m;
    if (!member_name) return 0;
    if (strcmp(member_name, name) == 0) return *(const int*)(m + 8) == type && *(const __s64*)(m + 16) == offset;
  }
  return 0;
}

/* The interpreter's code type agrees with the table. */
static int layout_checks(const struct python_layout* l, const __u8* code_type_object) {
  const char* name = *(const char* const*)(code_type_object + TP_NAME);
  const __u8* members = *(const __u8* const*)(code_type_object + TP_MEMBERS);
  return name && strcmp(name, "code") == 0 && *(const __s64*)(code_type_object + TP_BASICSIZE) == l->code_bytecode &&
         members && member_at(members, "co_filename", T_OBJECT, l->code_filename) &&
         member_at(members, "co_name", T_OBJECT, l->code_name) &&
         member_at(members, "co_qualname", T_OBJECT, l->code_qualname) &&
         member_at(members, "co_linetable", T_OBJECT, l->code_linetable) &&
         member_at(members, "co_firstlineno", T_INT, l->code_firstlineno);
}

void mt_python_open(struct mt_stacks_header* header, const char* pythonmalloc, __u32 pid) {
  const unsigned long* version = find_symbol("Py_Version");
  if (!version) {
    /* CPython before 3.11 has no Py_Version. */
    if (find_symbol("_PyRuntime")) __atomic_fetch_add(&header->python_refused_version, 1, __ATOMIC_RELAXED);
    return;
  }
  if (!pythonmalloc || (strcmp(pythonmalloc, "malloc") != 0 && strcmp(pythonmalloc, "malloc_debug") != 0))
    __atomic_fetch_add(&header->python_pymalloc, 1, __ATOMIC_RELAXED);
  __u32 minor = (__u32)(*version >> 16) & 0xffff;
  const struct python_layout* l = NULL;
  for (size_t i = 0; i < sizeof(python_layouts) / sizeof(python_layouts[0]); ++i)
    if (python_layouts[i].version == minor) l = &python_layouts[i];
  if (!l) {
    __atomic_fetch_add(&header->python_refused_version, 1, __ATOMIC_RELAXED);
    return;
  }
  const __u8* code = find_symbol("PyCode_Type");
  void* unicode = find_symbol("PyUnicode_Type");
  void* bytes = find_symbol("PyBytes_Type");
  void* tstate = find_symbol("PyGILState_GetThisThreadState");
  void* interp = find_symbol("PyInterpreterState_Main");
  void* set = MAP_FAILED;
  if (code && unicode && bytes && tstate && interp && layout_checks(l, code))
    set = mmap(NULL, CODE_SLOTS * sizeof(__u64), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
               MT_OWN_MAPPING_FD, 0);
  if (set == MAP_FAILED) {
    __atomic_fetch_add(&header->python_refused_layout, 1, __ATOMIC_RELAXED);
    return;
  }
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  salt = ((__u64)now.tv_nsec ^ ((__u64)now.tv_sec << 30) ^ ((__u64)pid << 40)) * 0x9e3779b97f4a7c15ULL;
  defined_codes = set;
  code_type = (__u64)(uintptr_t)code;
  unicode_type = (__u64)(uintptr_t)unicode;
  bytes_type = (__u64)(uintptr_t)bytes;
  this_thread_state = (tstate_fn)tstate;
  main_interpreter = (interp_fn)interp;
  counters = header;
  layout = l;
  __atomic_fetch_add(&header->python_processes, 1, __ATOMIC_RELAXED);
}

int mt_python_on(void) { return layout != NULL; }

/* ------------------------------------------------------------------ codes */

static __u64 mix(__u64 hash, __u64 word) { return (hash ^ word) * 0x00000100000001b3ULL; }

/* The code object at `code`, by its address and the members that name it:
 * the thread's known entry for it, its identity computed again when a
 * member changed (a new code object at the address). */
static struct mt_known_code* code_identity(struct mt_python_stack* out, __u64 code) {
  const struct python_layout* l = layout;
  __u64 filename = load64(code + l->code_filename), name = load64(code + l->code_name);
  __u64 qualname = load64(code + l->code_qualname), table = load64(code + l->code_linetable);
  __s32 first_line = *(const volatile __s32*)(uintptr_t)(code + l->code_firstlineno);
  struct mt_known_code* k = &out->known[(code >> 4) & (MT_PYTHON_KNOWN_CODES - 1)];
  if (k->code == code && k->members[0] == filename && k->members[1] == name && k->members[2] == qualname &&
      k->members[3] == table && k->first_line == first_line)
    return k;
  __u64 id = mix(mix(mix(mix(mix(mix(salt, code), filename), name), qualname), table), (__u64)first_line);
  *k = (struct mt_known_code){code, {filename, name, qualname, table}, first_line, 0, id ? id : 1};
  return k;
}

static __u64* code_slot(__u64 id, int* found) {
  __u64 home = (id * 0x9e3779b97f4a7c15ULL) >> 49;
  for (__u32 i = 0; i < CODE_PROBES; ++i) {
    __u64* s = &defined_codes[(home + i) & (CODE_SLOTS - 1)];
    __u64 value = __atomic_load_n(s, __ATOMIC_RELAXED);
    if (value == id || value == 0) {
      *found = value == id;
      return s;
    }
  }
  *found = 0;
  return NULL;
}

/* Claims `id`'s slot for this thread's definition: 0 when another thread
 * took it first, `*taken_by` then the id it holds. */
static int claim_code(__u64* slot, __u64 id, __u64* taken_by) {
  __u64 empty = 0;
  if (!slot) return 1; /* the set is full: defined again, each time */
  int claimed = __atomic_compare_exchange_n(slot, &empty, id, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  *taken_by = empty;
  return claimed;
}

/* A string object's text as UTF-8, cut at `room`; -1 when it is no string. */
static int read_string(__u32 pid, __u64 object, char* to, __u32 room) {
  __u8 head[STR_DATA];
  if (!copy_checked(pid, object, head, sizeof(head)) || *(__u64*)(head + OB_TYPE) != unicode_type) return -1;
  __u32 state = *(__u32*)(head + STR_STATE);
  int compact = (state >> 5) & 1, ascii = (state >> 6) & 1, kind = (state >> 2) & 7;
  __s64 length = *(__s64*)(head + STR_LENGTH);
  if (!compact || length < 0) return -1;
  if (ascii) {
    __u32 n = length < room ? (__u32)length : room;
    return copy_checked(pid, object + STR_ASCII_DATA, to, n) ? (int)n : -1;
  }
  __u64 utf8 = *(__u64*)(head + STR_UTF8);
  __s64 utf8_length = *(__s64*)(head + STR_UTF8_LENGTH);
  if (utf8 && utf8_length >= 0) {
    __u32 n = utf8_length < room ? (__u32)utf8_length : room;
    return copy_checked(pid, utf8, to, n) ? (int)n : -1;
  }
  if (kind != 1) return -1;
  /* Latin-1, as UTF-8. */
  __u8 latin[MT_PYTHON_NAME_BYTES / 2];
  __u32 n = length < (__s64)sizeof(latin) ? (__u32)length : sizeof(latin);
  if (n > room / 2) n = room / 2;
  if (!copy_checked(pid, object + STR_DATA, latin, n)) return -1;
  __u32 out = 0;
  for (__u32 i = 0; i < n; ++i) {
    if (latin[i] < 0x80) {
      to[out++] = (char)latin[i];
    } else {
      to[out++] = (char)(0xc0 | (latin[i] >> 6));
      to[out++] = (char)(0x80 | (latin[i] & 0x3f));
    }
  }
  return (int)out;
}

/* Appends the definition of code object `code` (identity `id`) to `out`;
 * 0 when it has no room there, or the object is not what it should be. */
static int stage_code(struct mt_python_stack* out, __u32 pid, __u64 code, __u64 id, int* no_room) {
  const struct python_layout* l = layout;
  __u8 head[256];
  if (l->code_bytecode > sizeof(head) || !copy_checked(pid, code, head, l->code_bytecode)) return 0;
  __u64 max = MT_PYTHON_CODE_BYTES - out->code_bytes;
  __u64 need = sizeof(struct mt_python_code) + 3 * MT_PYTHON_NAME_BYTES + MT_PYTHON_LINE_TABLE_BYTES + 8;
  if (need > max) {
    *no_room = 1;
    return 0;
  }
  __u8* at = out->definitions + out->code_bytes;
  struct mt_python_code* c = (struct mt_python_code*)at;
  char* text = (char*)(c + 1);
  int name = read_string(pid, *(__u64*)(head + l->code_name), text, MT_PYTHON_NAME_BYTES);
  int qualname = name < 0 ? -1 : read_string(pid, *(__u64*)(head + l->code_qualname), text + name, MT_PYTHON_NAME_BYTES);
  int filename = qualname < 0 ? -1
                              : read_string(pid, *(__u64*)(head + l->code_filename), text + name + qualname,
                                            MT_PYTHON_NAME_BYTES);
  if (filename < 0) return 0;
  __u64 table = *(__u64*)(head + l->code_linetable);
  __u8 table_head[BYTES_DATA];
  if (!copy_checked(pid, table, table_head, sizeof(table_head)) || *(__u64*)(table_head + OB_TYPE) != bytes_type)
    return 0;
  __s64 table_length = *(__s64*)(table_head + OB_SIZE);
  if (table_length < 0) return 0;
  __u32 kept = table_length < MT_PYTHON_LINE_TABLE_BYTES ? (__u32)table_length : MT_PYTHON_LINE_TABLE_BYTES;
  if (!copy_checked(pid, table + BYTES_DATA, text + name + qualname + filename, kept)) return 0;
  c->id = id;
  c->first_line = (__u32) * (__s32*)(head + l->code_firstlineno);
  c->name_len = (__u16)name;
  c->qualname_len = (__u16)qualname;
  c->filename_len = (__u16)filename;
  c->line_table_cut = kept < table_length;
  c->line_table_len = kept;
  __u64 size = mt_python_code_size(c);
  memset(at + sizeof(*c) + name + qualname + filename + kept, 0, size - (sizeof(*c) + name + qualname + filename + kept));
  out->code_bytes += (__u32)size;
  return 1;
}

/* ------------------------------------------------------------------ frames */

/* The thread's data stack chunk holding the frame header at `frame`: 1
 * when it lies in the live part of one. */
static int in_data_stack(__u64 tstate, __u64 frame) {
  const struct python_layout* l = layout;
  __u64 chunk = load64(tstate + l->tstate_datastack_chunk);
  __u64 top = load64(tstate + l->tstate_datastack_top);
  for (int i = 0; i < MAX_STACK_CHUNKS && plausible(chunk); ++i) {
    __u64 end = chunk + load64(chunk + l->chunk_size);
    if (i == 0 && top <= end) end = top;
    if (frame >= chunk + l->chunk_data && frame + l->frame_size <= end) return 1;
    chunk = load64(chunk + l->chunk_previous);
  }
  return 0;
}

static int valid_cframe(__u64 cframe, __u64 tstate, __u64 stack_low, __u64 stack_high) {
  return cframe == tstate + layout->tstate_root_cframe ||
         (!(cframe & 7) && cframe >= stack_low && cframe + 24 <= stack_high);
}

/* The place of `instruction` of the code object `known` in call paths: its
 * line, from the thread's known lines or the code's line table read as far
 * as definitions carry it (MT_PYTHON_LINE_TABLE_BYTES: the report decodes
 * the same bytes with the same decoder, and gives the instruction the same
 * line). Plain loads: the line table is the running code object's. */
static __u64 place_of(struct mt_python_stack* out, const struct mt_known_code* known, __u32 instruction) {
  __u64 key = (known->id ^ instruction) * 0x9e3779b97f4a7c15ULL;
  struct mt_known_line* k = &out->lines[key >> (64 - MT_PYTHON_KNOWN_LINES_BITS)];
  if (k->code == known->id && k->instruction == instruction) return k->place;
  __u64 place = MT_PYTHON_PLACE_BY_INSTRUCTION | instruction;
  __u64 table = known->members[3];
  if (plausible(table) && load64(table + OB_TYPE) == bytes_type) {
    __s64 size = (__s64)load64(table + OB_SIZE);
    if (size >= 0)
      place = mt_python_line((const __u8*)(uintptr_t)(table + BYTES_DATA),
                             size < MT_PYTHON_LINE_TABLE_BYTES ? (__u64)size : MT_PYTHON_LINE_TABLE_BYTES,
                             (__u32)known->first_line, instruction);
  }
  *k = (struct mt_known_line){known->id, instruction, place};
  return place;
}

/* Frame `i` of `out` (at `frame`, running `code` at `at`, by the eval loop
 * of `cframe`), from its code object, which is defined if this process
 * has not yet; 0 when the code object is not one. */
static int read_frame(struct mt_python_stack* out, __u32 i, __u32 pid, __u64 frame, __u64 code, __u64 at,
                      __u64 cframe) {
  const struct python_layout* l = layout;
  if (!plausible(code) || load64(code + OB_TYPE) != code_type) return 0;
  __u64 units = load64(code + OB_SIZE);
  __u64 first = code + l->code_bytecode;
  __u32 instruction;
  if (at == first - 2)
    instruction = MT_PYTHON_BEFORE_FIRST;
  else if (at >= first && at < first + units * 2 && !((at - first) & 1))
    instruction = (__u32)((at - first) / 2);
  else
    return 0;
  struct mt_known_code* known = code_identity(out, code);
  __u64 id = known->id;
  out->frame[i] = (struct mt_python_frame){id, instruction, 0};
  out->place[i] = place_of(out, known, instruction);
  out->anchor[i] = cframe;
  out->frame_address[i] = frame;
  out->code_address[i] = code;
  out->prev_instr[i] = at;
  int found = known->defined;
  __u64* slot = found ? NULL : code_slot(id, &found);
  known->defined = found;
  if (!found && !out->deferred) {
    __u32 before = out->code_bytes;
    int no_room = 0;
    __u64 taken_by;
    if (stage_code(out, pid, code, id, &no_room)) {
      if (claim_code(slot, id, &taken_by)) {
        known->defined = 1;
        ++out->codes;
        __atomic_fetch_add(&counters->python_codes, 1, __ATOMIC_RELAXED);
      } else {
        out->code_bytes = before;
        /* Another thread defines it; or took the slot for another code:
         * this one is defined with the path next time. */
        if (taken_by != id) out->deferred = 1;
        known->defined = taken_by == id;
      }
    } else if (no_room) {
      out->deferred = 1;
      __atomic_fetch_add(&counters->python_codes_deferred, 1, __ATOMIC_RELAXED);
    }
  }
  out->settled[i] = (__u8)known->defined;
  return 1;
}

/* Frames left to compare for which follow_unchanged's call pays. */
#define FOLLOWED_AT_LEAST 4

/* Follows the chain from frame `i` (at `*frame`, run by `cframe`'s loop)
 * while each frame is as the last read found it there and lies in the
 * data stack's live chunk [live_low, live_last]; stops before an entry
 * frame. Returns the index of the first frame it did not follow, `*frame`
 * that frame. Where a deep stack's read spends its time: a loop of its own,
 * its values in registers. */
static __attribute__((noinline)) __u32 follow_unchanged(const struct mt_python_stack* out, __u32 i, __u32 kept,
                                                        __u64* frame, __u64 cframe, __u64 live_low, __u64 live_last) {
  const __u32 frame_code = layout->frame_code, frame_prev_instr = layout->frame_prev_instr,
              frame_previous = layout->frame_previous, frame_is_entry = layout->frame_is_entry;
  __u64 f = *frame;
  if (live_last < live_low) return i;
  /* One compare for live_low <= f <= live_last. */
  for (const __u64 span = live_last - live_low; i < kept && f - live_low <= span; ++i) {
    const __u8* p = (const __u8*)(uintptr_t)f;
    __u64 code = *(const volatile __u64*)(p + frame_code);
    __u64 at = *(const volatile __u64*)(p + frame_prev_instr);
    /* One branch for the four words: most frames of a deep stack are. */
    if (((out->frame_address[i] ^ f) | (out->code_address[i] ^ code) | (out->prev_instr[i] ^ at) |
         (out->anchor[i] ^ cframe)) ||
        !out->settled[i] || *(const volatile __u8*)(p + frame_is_entry))
      break;
    f = *(const volatile __u64*)(p + frame_previous);
    if (!f) {
      ++i;
      break;
    }
  }
  *frame = f;
  return i;
}

void mt_python_read(struct mt_python_stack* out, __u64 stack_low, __u64 stack_high, __u32 pid) {
  const struct python_layout* l = layout;
  __u32 kept = out->frames, changed_below = 0;
  out->frames = out->codes = out->code_bytes = out->deferred = out->kept_from = 0;
  __u64 tstate = (__u64)(uintptr_t)this_thread_state();
  if (!plausible(tstate)) return;
  /* The thread's own state of the main interpreter, as the table has it. */
  void* main = main_interpreter();
  if ((__u64)(uintptr_t)main != load64(tstate + l->tstate_interp) ||
      load64(tstate + l->tstate_thread_id) != (__u64)pthread_self())
    return;
  __u64 cframe = load64(tstate + l->tstate_cframe);
  if (!valid_cframe(cframe, tstate, stack_low, stack_high)) return;
  __u64 frame = load64(cframe + l->cframe_current_frame);
  /* The layout's offsets in registers: the loop's stores into `out` might
   * alias the table, and each would be loaded again at every frame. */
  const __u32 frame_code = l->frame_code, frame_prev_instr = l->frame_prev_instr,
              frame_previous = l->frame_previous, frame_is_entry = l->frame_is_entry, frame_size = l->frame_size;
  /* The live part of the data stack's newest chunk, where most frames are:
   * a frame header starting in [live_low, live_last] lies in it. */
  __u64 chunk = load64(tstate + l->tstate_datastack_chunk);
  __u64 live_low = chunk + l->chunk_data, live_last = load64(tstate + l->tstate_datastack_top) - frame_size;
  __u8 copy[128];
  __u32 i = 0;
  while (frame) {
    if (kept >= i + FOLLOWED_AT_LEAST) {
      i = follow_unchanged(out, i, kept, &frame, cframe, live_low, live_last);
      if (!frame) break;
    }
    if (i == MT_MAX_PYTHON_FRAMES) {
      __atomic_fetch_add(&counters->python_frames_cut, 1, __ATOMIC_RELAXED);
      break;
    }
    const __u8* f;
    if ((frame >= live_low && frame <= live_last) || (plausible(frame) && in_data_stack(tstate, frame))) {
      f = (const __u8*)(uintptr_t)frame;
    } else {
      if (!plausible(frame) || frame_size > sizeof(copy) || !copy_checked(pid, frame, copy, frame_size)) break;
      f = copy;
    }
    __u64 code = *(const volatile __u64*)(f + frame_code);
    __u64 at = *(const volatile __u64*)(f + frame_prev_instr);
    __u64 previous = *(const volatile __u64*)(f + frame_previous);
    __u8 entry = *(const volatile __u8*)(f + frame_is_entry);
    /* Read unless the last read found it so (its identity and instruction
     * then stand: a frame holds its code object, the same one while it
     * runs). One branch for the four words. */
    if (!(i < kept && !((out->frame_address[i] ^ frame) | (out->code_address[i] ^ code) | (out->prev_instr[i] ^ at) |
                        (out->anchor[i] ^ cframe)) && out->settled[i])) {
      if (!read_frame(out, i, pid, frame, code, at, cframe)) break;
      changed_below = i + 1;
    }
    ++i;
    if (entry) {
      /* The frame this eval loop was entered with: the next frame is run by
       * the loop of the previous _PyCFrame. */
      cframe = load64(cframe + l->cframe_previous);
      if (!valid_cframe(cframe, tstate, stack_low, stack_high)) break;
    }
    frame = previous;
  }
  out->frames = i;
  /* Frames from changed_below on are where the last read found them, if
   * there are as many. */
  out->kept_from = out->frames == kept ? changed_below : out->frames;
}

void mt_python_mix(struct mt_python_stack* python, const __u8* cfas, __u32 stride, __u32 native_frames,
                   int chain_final, __u64* hash) {
  const __u32 n = python->frames;
  /* The frames, outermost first, from the first that changed. */
  __u64 h = python->kept_from < n ? python->mixed[python->kept_from] : 0x811c9dc5ULL;
  for (__u32 i = python->kept_from; i-- > 0;) {
    python->next_run[i] =
        (__u8)(i + 1 == n || python->anchor[i + 1] != python->anchor[i] ? i + 1 : python->next_run[i + 1]);
    h = mix(h, python->frame[i].code ^ (python->place[i] * 0x9e3779b97f4a7c15ULL));
    python->mixed[i] = h;
  }
  /* The runs, innermost first: the native frame k spans [cfa(k), cfa(k + 1)). */
  h = mix(*hash, h);
  __u32 k = 0;
  for (__u32 i = 0; i < n; i = python->next_run[i]) {
    while (k + 1 < native_frames && *(const __u64*)(cfas + (size_t)(k + 1) * stride) <= python->anchor[i]) ++k;
    __u32 native_index = k + 1 == native_frames && !chain_final ? native_frames : k;
    python->frame[i].native_index = native_index;
    h = mix(h, (i | (__u64)native_index << 32) * 0x9e3779b97f4a7c15ULL);
  }
  *hash = h;
}

void mt_python_place_frames(struct mt_python_stack* python) {
  for (__u32 i = 0; i < python->frames; i = python->next_run[i])
    for (__u32 j = i + 1; j < python->next_run[i]; ++j) python->frame[j].native_index = python->frame[i].native_index;
}
