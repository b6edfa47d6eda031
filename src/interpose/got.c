/* GOT entries found through each module's dynamic section: its relocations
 * with a symbol (jump slots of calls through the PLT, GLOB_DAT entries of
 * calls and addresses taken through the GOT, as glibc's own calls to malloc
 * and free are) name the entry and the function. glibc has relocated the
 * dynamic section's addresses in place (the vDSO's are not: skipped). */
#define _GNU_SOURCE
#include "got.h"

#include <elf.h>
#include <link.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

struct walk {
  const struct mt_got_name* names;
  size_t count;
  const void* own;
  int restore;
  size_t changed;
  int unrelocated;
};

static int holds(const struct dl_phdr_info* info, ElfW(Word) type, uintptr_t address) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* p = &info->dlpi_phdr[i];
    if (p->p_type == type && address >= info->dlpi_addr + p->p_vaddr &&
        address < info->dlpi_addr + p->p_vaddr + p->p_memsz)
      return 1;
  }
  return 0;
}

/* The ends of the pages the loader made read-only after relocating
 * (PT_GNU_RELRO, rounded down at both ends as glibc does). */
static void relro_pages(const struct dl_phdr_info* info, uintptr_t* low, uintptr_t* high) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  *low = *high = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* p = &info->dlpi_phdr[i];
    if (p->p_type != PT_GNU_RELRO) continue;
    *low = (info->dlpi_addr + p->p_vaddr) & ~(page - 1);
    *high = (info->dlpi_addr + p->p_vaddr + p->p_memsz) & ~(page - 1);
  }
}

static void write_entry(void** entry, void* value, uintptr_t relro_low, uintptr_t relro_high) {
  uintptr_t page = (uintptr_t)entry & ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
  int read_only = page >= relro_low && page < relro_high;
  if (read_only && mprotect((void*)page, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE) != 0) return;
  /* One aligned store: a thread calling through the entry meanwhile takes
   * either function. */
  __atomic_store_n(entry, value, __ATOMIC_RELEASE);
  if (read_only) mprotect((void*)page, (size_t)sysconf(_SC_PAGESIZE), PROT_READ);
}

static uintptr_t relocated(uintptr_t value, const struct dl_phdr_info* info) {
  return value < info->dlpi_addr ? value + info->dlpi_addr : value;
}

static void visit_relocations(const struct dl_phdr_info* info, const ElfW(Rela)* relocations, size_t bytes,
                              const ElfW(Sym)* symbols, const char* strings, struct walk* walk) {
  uintptr_t relro_low, relro_high;
  relro_pages(info, &relro_low, &relro_high);
  for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
    const ElfW(Rela)* r = &relocations[i];
    unsigned type = ELF64_R_TYPE(r->r_info);
    if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
    const ElfW(Sym)* symbol = &symbols[ELF64_R_SYM(r->r_info)];
    if (symbol->st_shndx != SHN_UNDEF) continue; /* the module's own definition */
    const char* name = strings + symbol->st_name;
    for (size_t n = 0; n < walk->count; ++n) {
      const struct mt_got_name* f = &walk->names[n];
      if (strcmp(name, f->name) != 0) continue;
      void** entry = (void**)(info->dlpi_addr + r->r_offset);
      void* now = __atomic_load_n(entry, __ATOMIC_ACQUIRE);
      if (walk->restore) {
        if (now == f->wrapper) {
          write_entry(entry, f->real, relro_low, relro_high);
          ++walk->changed;
        }
      } else if (now == f->real || (type == R_X86_64_JUMP_SLOT && holds(info, PT_LOAD, (uintptr_t)now))) {
        write_entry(entry, f->wrapper, relro_low, relro_high);
        ++walk->changed;
      } else if ((uintptr_t)now < info->dlpi_addr || now == NULL) {
        /* The link-time value: the loader has not relocated it yet. */
        walk->unrelocated = 1;
      }
      break;
    }
  }
}

static int visit_module(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct walk* walk = data;
  if (info->dlpi_addr == getauxval(AT_BASE) || info->dlpi_addr == getauxval(AT_SYSINFO_EHDR) ||
      holds(info, PT_LOAD, (uintptr_t)walk->own))
    return 0;
  const ElfW(Dyn)* dynamic = NULL;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dynamic = (const ElfW(Dyn)*)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dynamic) return 0; /* static, or not mapped completely yet */
  const ElfW(Sym)* symbols = NULL;
  const char* strings = NULL;
  const ElfW(Rela)* rela = NULL;
  const ElfW(Rela)* jmprel = NULL;
  size_t rela_bytes = 0, jmprel_bytes = 0;
  int plt_is_rela = 1;
  for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: symbols = (const ElfW(Sym)*)relocated(d->d_un.d_ptr, info); break;
      case DT_STRTAB: strings = (const char*)relocated(d->d_un.d_ptr, info); break;
      case DT_RELA: rela = (const ElfW(Rela)*)relocated(d->d_un.d_ptr, info); break;
      case DT_RELASZ: rela_bytes = d->d_un.d_val; break;
      case DT_JMPREL: jmprel = (const ElfW(Rela)*)relocated(d->d_un.d_ptr, info); break;
      case DT_PLTRELSZ: jmprel_bytes = d->d_un.d_val; break;
      case DT_PLTREL: plt_is_rela = d->d_un.d_val == DT_RELA; break;
    }
  }
  if (!symbols || !strings) return 0;
  if (rela) visit_relocations(info, rela, rela_bytes, symbols, strings, walk);
  if (jmprel && plt_is_rela) visit_relocations(info, jmprel, jmprel_bytes, symbols, strings, walk);
  return 0;
}

size_t mt_got_redirect(const struct mt_got_name* names, size_t count, const void* own, int* unrelocated) {
  struct walk walk = {names, count, own, 0, 0, 0};
  dl_iterate_phdr(visit_module, &walk);
  if (unrelocated) *unrelocated = walk.unrelocated;
  return walk.changed;
}

size_t mt_got_restore(const struct mt_got_name* names, size_t count, const void* own) {
  struct walk walk = {names, count, own, 1, 0, 0};
  dl_iterate_phdr(visit_module, &walk);
  return walk.changed;
}
