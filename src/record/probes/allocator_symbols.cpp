#include "record/probes/allocator_symbols.h"

#include <gelf.h>

#include <algorithm>
#include <array>
#include <map>
#include <span>
#include <unordered_map>

#include "module/elf_file.h"
#include "record/probes/probe_placement.h"
#include "wire.h"

namespace memtrack {
namespace {

constexpr unsigned kNone = MT_ARG_NONE;

// Cookie builders; arguments are 0-based argument indexes.
constexpr uint64_t allocates(mt_kind kind, unsigned size, unsigned count = kNone) {
  return MT_COOKIE(kind, size, count, kNone, kNone);
}
constexpr uint64_t resizes(unsigned ptr, unsigned size, unsigned count = kNone) {
  return MT_COOKIE(MT_REALLOC, size, count, ptr, kNone);
}
constexpr uint64_t frees(unsigned ptr) { return MT_COOKIE(MT_FREE, kNone, kNone, ptr, kNone); }
// Returns 0 on success and stores the block through argument `out`.
constexpr uint64_t allocates_into(unsigned out, unsigned size) {
  return MT_COOKIE(MT_ALIGNED_ALLOC, size, kNone, kNone, out);
}

struct Spec {
  std::string_view name;
  uint64_t cookie;
};

// Kinds: plain allocation MT_MALLOC; zeroing without alignment MT_CALLOC;
// any explicit alignment (including page alignment: valloc, pvalloc) wins
// over zeroing and gives MT_ALIGNED_ALLOC; anything that takes an old block
// and returns a new one MT_REALLOC.
//
// The C library family; jemalloc also exports it with the "je_" and "_rjem_"
// (Rust tikv-jemallocator) prefixes.
constexpr std::array kLibc = {
    Spec{"malloc", allocates(MT_MALLOC, 0)},
    Spec{"calloc", allocates(MT_CALLOC, 1, 0)},
    Spec{"realloc", resizes(0, 1)},
    Spec{"free", frees(0)},
    Spec{"aligned_alloc", allocates(MT_ALIGNED_ALLOC, 1)},    // (alignment, size)
    Spec{"posix_memalign", allocates_into(0, 2)},             // (out, alignment, size)
    Spec{"memalign", allocates(MT_ALIGNED_ALLOC, 1)},         // (alignment, size)
    Spec{"valloc", allocates(MT_ALIGNED_ALLOC, 0)},
    Spec{"pvalloc", allocates(MT_ALIGNED_ALLOC, 0)},  // the size before rounding to pages
    Spec{"reallocarray", resizes(0, 2, 1)},           // (ptr, count, size)
    Spec{"free_sized", frees(0)},                     // C23 (ptr, size)
    Spec{"free_aligned_sized", frees(0)},             // C23 (ptr, alignment, size)
    Spec{"cfree", frees(0)},
};

// jemalloc's non-standard API. xallocx is left out: it resizes in place and
// returns the new usable size, not a block, so the return probe has no address
// to record and the size change has no event kind.
constexpr std::array kJemallocExtensions = {
    Spec{"mallocx", allocates(MT_MALLOC, 0)},  // (size, flags)
    Spec{"rallocx", resizes(0, 1)},            // (ptr, size, flags)
    Spec{"dallocx", frees(0)},                 // (ptr, flags)
    Spec{"sdallocx", frees(0)},                // (ptr, size, flags)
};

// Itanium C++ ABI operator new / delete for a 64-bit size_t.
constexpr std::array kCxx = {
    Spec{"_Znwm", allocates(MT_MALLOC, 0)},
    Spec{"_Znam", allocates(MT_MALLOC, 0)},
    Spec{"_ZnwmRKSt9nothrow_t", allocates(MT_MALLOC, 0)},
    Spec{"_ZnamRKSt9nothrow_t", allocates(MT_MALLOC, 0)},
    Spec{"_ZnwmSt11align_val_t", allocates(MT_ALIGNED_ALLOC, 0)},  // (size, alignment)
    Spec{"_ZnamSt11align_val_t", allocates(MT_ALIGNED_ALLOC, 0)},
    Spec{"_ZnwmSt11align_val_tRKSt9nothrow_t", allocates(MT_ALIGNED_ALLOC, 0)},
    Spec{"_ZnamSt11align_val_tRKSt9nothrow_t", allocates(MT_ALIGNED_ALLOC, 0)},
    Spec{"_ZdlPv", frees(0)},
    Spec{"_ZdaPv", frees(0)},
    Spec{"_ZdlPvm", frees(0)},
    Spec{"_ZdaPvm", frees(0)},
    Spec{"_ZdlPvSt11align_val_t", frees(0)},
    Spec{"_ZdaPvSt11align_val_t", frees(0)},
    Spec{"_ZdlPvmSt11align_val_t", frees(0)},
    Spec{"_ZdaPvmSt11align_val_t", frees(0)},
    Spec{"_ZdlPvRKSt9nothrow_t", frees(0)},
    Spec{"_ZdaPvRKSt9nothrow_t", frees(0)},
    Spec{"_ZdlPvSt11align_val_tRKSt9nothrow_t", frees(0)},
    Spec{"_ZdaPvSt11align_val_tRKSt9nothrow_t", frees(0)},
};

// mimalloc's mi_ API (mimalloc.h). Left out: the mi_heap_* API (an explicit
// heap argument; mi_realloc, mi_malloc_aligned... tail-call it, so probing it
// would double the probes on those paths), mi_expand (in-place like xallocx),
// mi_reallocarr (takes a pointer to the pointer; the old block cannot be
// named by a cookie), and the string duplicators mi_strdup, mi_strndup,
// mi_wcsdup, mi_mbsdup, mi_realpath, mi_dupenv_s, mi_wdupenv_s (no size
// argument: the size is a string length).
constexpr std::array kMimalloc = {
    Spec{"mi_malloc", allocates(MT_MALLOC, 0)},
    Spec{"mi_malloc_small", allocates(MT_MALLOC, 0)},
    Spec{"mi_mallocn", allocates(MT_MALLOC, 1, 0)},  // (count, size)
    Spec{"mi_zalloc", allocates(MT_CALLOC, 0)},      // (size): no count argument
    Spec{"mi_zalloc_small", allocates(MT_CALLOC, 0)},
    Spec{"mi_calloc", allocates(MT_CALLOC, 1, 0)},
    Spec{"mi_realloc", resizes(0, 1)},
    Spec{"mi_reallocf", resizes(0, 1)},
    Spec{"mi_rezalloc", resizes(0, 1)},
    Spec{"mi_reallocn", resizes(0, 2, 1)},       // (ptr, count, size)
    Spec{"mi_recalloc", resizes(0, 2, 1)},       // (ptr, count, size)
    Spec{"mi_reallocarray", resizes(0, 2, 1)},   // (ptr, count, size)
    Spec{"mi_free", frees(0)},
    Spec{"mi_cfree", frees(0)},
    Spec{"mi_free_size", frees(0)},
    Spec{"mi_free_aligned", frees(0)},
    Spec{"mi_free_size_aligned", frees(0)},
    Spec{"mi_malloc_aligned", allocates(MT_ALIGNED_ALLOC, 0)},      // (size, alignment)
    Spec{"mi_malloc_aligned_at", allocates(MT_ALIGNED_ALLOC, 0)},   // (size, alignment, offset)
    Spec{"mi_zalloc_aligned", allocates(MT_ALIGNED_ALLOC, 0)},      // (size, alignment)
    Spec{"mi_zalloc_aligned_at", allocates(MT_ALIGNED_ALLOC, 0)},
    Spec{"mi_calloc_aligned", allocates(MT_ALIGNED_ALLOC, 1, 0)},   // (count, size, alignment)
    Spec{"mi_calloc_aligned_at", allocates(MT_ALIGNED_ALLOC, 1, 0)},
    Spec{"mi_realloc_aligned", resizes(0, 1)},                      // (ptr, size, alignment)
    Spec{"mi_realloc_aligned_at", resizes(0, 1)},
    Spec{"mi_rezalloc_aligned", resizes(0, 1)},
    Spec{"mi_rezalloc_aligned_at", resizes(0, 1)},
    Spec{"mi_recalloc_aligned", resizes(0, 2, 1)},         // (ptr, count, size, alignment)
    Spec{"mi_recalloc_aligned_at", resizes(0, 2, 1)},
    Spec{"mi_aligned_recalloc", resizes(0, 2, 1)},         // (ptr, count, size, alignment)
    Spec{"mi_aligned_offset_recalloc", resizes(0, 2, 1)},  // (..., alignment, offset)
    Spec{"mi_aligned_alloc", allocates(MT_ALIGNED_ALLOC, 1)},  // (alignment, size)
    Spec{"mi_memalign", allocates(MT_ALIGNED_ALLOC, 1)},       // (alignment, size)
    Spec{"mi_posix_memalign", allocates_into(0, 2)},
    Spec{"mi_valloc", allocates(MT_ALIGNED_ALLOC, 0)},
    Spec{"mi_pvalloc", allocates(MT_ALIGNED_ALLOC, 0)},
    Spec{"mi_new", allocates(MT_MALLOC, 0)},
    Spec{"mi_new_nothrow", allocates(MT_MALLOC, 0)},
    Spec{"mi_new_n", allocates(MT_MALLOC, 1, 0)},                // (count, size)
    Spec{"mi_new_aligned", allocates(MT_ALIGNED_ALLOC, 0)},      // (size, alignment)
    Spec{"mi_new_aligned_nothrow", allocates(MT_ALIGNED_ALLOC, 0)},
    Spec{"mi_new_realloc", resizes(0, 1)},
    Spec{"mi_new_reallocn", resizes(0, 2, 1)},  // (ptr, count, size)
};

// gperftools tcmalloc's tc_ API (gperftools/tcmalloc.h).
constexpr std::array kTcmalloc = {
    Spec{"tc_malloc", allocates(MT_MALLOC, 0)},
    Spec{"tc_malloc_skip_new_handler", allocates(MT_MALLOC, 0)},
    Spec{"tc_calloc", allocates(MT_CALLOC, 1, 0)},
    Spec{"tc_realloc", resizes(0, 1)},
    Spec{"tc_free", frees(0)},
    Spec{"tc_free_sized", frees(0)},  // (ptr, size)
    Spec{"tc_cfree", frees(0)},
    Spec{"tc_memalign", allocates(MT_ALIGNED_ALLOC, 1)},  // (alignment, size)
    Spec{"tc_posix_memalign", allocates_into(0, 2)},
    Spec{"tc_valloc", allocates(MT_ALIGNED_ALLOC, 0)},
    Spec{"tc_pvalloc", allocates(MT_ALIGNED_ALLOC, 0)},
    Spec{"tc_new", allocates(MT_MALLOC, 0)},
    Spec{"tc_newarray", allocates(MT_MALLOC, 0)},
    Spec{"tc_new_nothrow", allocates(MT_MALLOC, 0)},
    Spec{"tc_newarray_nothrow", allocates(MT_MALLOC, 0)},
    Spec{"tc_new_aligned", allocates(MT_ALIGNED_ALLOC, 0)},  // (size, alignment)
    Spec{"tc_newarray_aligned", allocates(MT_ALIGNED_ALLOC, 0)},
    Spec{"tc_new_aligned_nothrow", allocates(MT_ALIGNED_ALLOC, 0)},
    Spec{"tc_newarray_aligned_nothrow", allocates(MT_ALIGNED_ALLOC, 0)},
    Spec{"tc_delete", frees(0)},
    Spec{"tc_deletearray", frees(0)},
    Spec{"tc_delete_nothrow", frees(0)},
    Spec{"tc_deletearray_nothrow", frees(0)},
    Spec{"tc_delete_sized", frees(0)},
    Spec{"tc_deletearray_sized", frees(0)},
    Spec{"tc_delete_aligned", frees(0)},
    Spec{"tc_deletearray_aligned", frees(0)},
    Spec{"tc_delete_sized_aligned", frees(0)},
    Spec{"tc_deletearray_sized_aligned", frees(0)},
    Spec{"tc_delete_aligned_nothrow", frees(0)},
    Spec{"tc_deletearray_aligned_nothrow", frees(0)},
};

// Exported glibc-compatible names that replacement allocators (tcmalloc,
// mimalloc, jemalloc's override option) define so that callers of
// __libc_malloc and friends reach them too; in glibc they alias the public
// names. reallocf (BSD) is mimalloc's. Left out on purpose: mimalloc's
// _aligned_malloc takes (alignment, size) where MSVC's takes (size,
// alignment), and vfree is too generic a name to trust as free().
constexpr std::array kCompat = {
    Spec{"__libc_malloc", allocates(MT_MALLOC, 0)},
    Spec{"__libc_calloc", allocates(MT_CALLOC, 1, 0)},
    Spec{"__libc_realloc", resizes(0, 1)},
    Spec{"__libc_free", frees(0)},
    Spec{"__libc_cfree", frees(0)},
    Spec{"__libc_memalign", allocates(MT_ALIGNED_ALLOC, 1)},
    Spec{"__libc_valloc", allocates(MT_ALIGNED_ALLOC, 0)},
    Spec{"__libc_pvalloc", allocates(MT_ALIGNED_ALLOC, 0)},
    Spec{"__posix_memalign", allocates_into(0, 2)},
    Spec{"reallocf", resizes(0, 1)},
};

// Where a C++ exception begins (libstdc++) and where unwinding starts
// (libgcc's unwinder), shared or linked in: probed at entry so that an
// exception thrown inside a probed allocation call can pass its return
// (alloc.bpf.c, on_unwind).
constexpr uint64_t kUnwinds = MT_COOKIE(MT_UNWIND, kNone, kNone, kNone, kNone);
constexpr std::array kUnwinder = {
    Spec{"__cxa_allocate_exception", kUnwinds},   // throw, before the exception's own malloc
    Spec{"_Unwind_RaiseException", kUnwinds},     // throw (also of foreign exceptions)
    Spec{"_Unwind_Resume_or_Rethrow", kUnwinds},  // rethrow
    Spec{"_Unwind_ForcedUnwind", kUnwinds},       // thread cancellation, forced unwinding
};

struct Catalogue {
  std::vector<AllocatorFunction> functions;
  std::unordered_map<std::string_view, const AllocatorFunction*> by_name;
};

// Ranks follow this order: standard C names, C++ operators, then
// vendor-specific names. Aliases of one address normally share a signature;
// if they did not, the standard name's contract is the one its callers rely
// on, so it wins.
const Catalogue& catalogue() {
  static const Catalogue cat = [] {
    Catalogue c;
    auto add = [&c](std::string name, uint64_t cookie) {
      int rank = static_cast<int>(c.functions.size());
      c.functions.push_back({std::move(name), cookie, rank});
    };
    for (const Spec& s : kLibc) add(std::string(s.name), s.cookie);
    for (const Spec& s : kCxx) add(std::string(s.name), s.cookie);
    for (const Spec& s : kJemallocExtensions) add(std::string(s.name), s.cookie);
    for (std::string_view prefix : {"je_", "_rjem_"}) {
      for (const Spec& s : kLibc) add(std::string(prefix) + std::string(s.name), s.cookie);
      for (const Spec& s : kJemallocExtensions)
        add(std::string(prefix) + std::string(s.name), s.cookie);
    }
    for (const Spec& s : kMimalloc) add(std::string(s.name), s.cookie);
    for (const Spec& s : kTcmalloc) add(std::string(s.name), s.cookie);
    for (const Spec& s : kCompat) add(std::string(s.name), s.cookie);
    for (const Spec& s : kUnwinder) add(std::string(s.name), s.cookie);
    // Pointers into `functions` stay valid: it is not resized after this.
    for (const AllocatorFunction& f : c.functions) c.by_name.emplace(f.name, &f);
    return c;
  }();
  return cat;
}

struct CodeSection {
  uint64_t addr;
  uint64_t size;
  uint64_t offset;
};

// The catalogue names found at one address.
struct Candidate {
  std::vector<const AllocatorFunction*> names;
  const CodeSection* section;
  uint64_t vaddr;
  uint64_t size;  // st_size; 0 when unknown
};

bool add_overflows(uint64_t a, uint64_t b, uint64_t* sum) { return __builtin_add_overflow(a, b, sum); }

// The argument registers the BPF entry programs read for `cookie`: only the
// arguments it names (alloc.bpf.c, arg_at).
ArgumentMask arguments_read(uint64_t cookie) {
  ArgumentMask mask = 0;
  for (unsigned arg : {MT_COOKIE_SIZE_ARG(cookie), MT_COOKIE_COUNT_ARG(cookie),
                       MT_COOKIE_PTR_ARG(cookie), MT_COOKIE_OUT_ARG(cookie)}) {
    if (arg != MT_ARG_NONE) mask |= static_cast<ArgumentMask>(1u << arg);
  }
  return mask;
}

constexpr unsigned kPageShift = 12;

// The cookie bits of a free-like function at `vaddr` of glibc's shared libc,
// probed `probe_delta` bytes past its entry, whose code spans
// [code_start, code_end): libc's direct calls to it are its own releases
// (wire.h). In a static executable the program's calls are direct too: never
// there. 0 when the distances do not fit the cookie.
uint64_t runtime_free_bits(uint64_t vaddr, uint64_t probe_delta, uint64_t code_start, uint64_t code_end) {
  uint64_t entry_page = vaddr >> kPageShift;
  uint64_t pages_below = entry_page - (code_start >> kPageShift);
  uint64_t pages_from = ((code_end + (1u << kPageShift) - 1) >> kPageShift) - entry_page;
  if (probe_delta > MT_RUNTIME_FREE_MAX_DELTA || pages_below > MT_RUNTIME_FREE_MAX_PAGES ||
      pages_from > MT_RUNTIME_FREE_MAX_PAGES)
    return 0;
  return MT_COOKIE_RUNTIME_FREE_OF(probe_delta, pages_below, pages_from);
}

}  // namespace

const AllocatorFunction* find_allocator_function(std::string_view name) {
  if (std::size_t at = name.find('@'); at != std::string_view::npos) name = name.substr(0, at);
  const Catalogue& c = catalogue();
  auto it = c.by_name.find(name);
  return it == c.by_name.end() ? nullptr : it->second;
}

std::vector<ProbeSite> find_probe_sites(const std::string& path) {
  ElfFile file(path);
  Elf* elf = file.elf();

  GElf_Ehdr ehdr;
  if (gelf_getehdr(elf, &ehdr) == nullptr) file.fail("cannot read the ELF header", true);
  if (gelf_getclass(elf) != ELFCLASS64 || ehdr.e_machine != EM_X86_64)
    file.fail("not an x86-64 ELF64 file");
  if (ehdr.e_type != ET_EXEC && ehdr.e_type != ET_DYN)
    file.fail("not an executable or shared object");

  std::size_t section_count = 0;
  if (elf_getshdrnum(elf, &section_count) != 0) file.fail("cannot read the section headers", true);
  // libelf reports no sections, rather than an error, when the table is cut.
  uint64_t declared = std::max<uint64_t>(section_count, ehdr.e_shnum);
  uint64_t table_end = 0;
  if (declared > 0 && (add_overflows(ehdr.e_shoff, declared * ehdr.e_shentsize, &table_end) ||
                       table_end > file.file_size())) {
    file.fail("truncated: the section header table lies past the end of the file");
  }

  std::vector<CodeSection> code_sections;
  std::vector<Elf_Scn*> symbol_tables;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr) file.fail("cannot read a section header", true);
    if (shdr.sh_type == SHT_SYMTAB || shdr.sh_type == SHT_DYNSYM) symbol_tables.push_back(scn);
    // NOBITS code sections (separate debug files) have no bytes to probe.
    bool code = shdr.sh_type == SHT_PROGBITS && (shdr.sh_flags & SHF_ALLOC) &&
                (shdr.sh_flags & SHF_EXECINSTR);
    if (!code) continue;
    uint64_t end = 0;
    if (add_overflows(shdr.sh_offset, shdr.sh_size, &end) || end > file.file_size())
      file.fail("truncated: a code section lies past the end of the file");
    code_sections.push_back({shdr.sh_addr, shdr.sh_size, shdr.sh_offset});
  }

  std::map<uint64_t, Candidate> by_offset;  // key: file offset of the entry
  for (Elf_Scn* table : symbol_tables) {
    GElf_Shdr shdr;
    gelf_getshdr(table, &shdr);
    Elf_Data* data = elf_getdata(table, nullptr);
    if (data == nullptr || shdr.sh_entsize == 0) file.fail("cannot read a symbol table", true);
    std::size_t count = data->d_size / shdr.sh_entsize;
    for (std::size_t i = 0; i < count; ++i) {
      GElf_Sym sym;
      if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr)
        file.fail("cannot read a symbol", true);
      // STT_GNU_IFUNC is left out: its address is the resolver, which runs
      // once at relocation time; the implementation it returns is a FUNC.
      // Any binding is taken: hidden-visibility builds (a Rust cdylib with
      // tikv-jemallocator) leave the real entry points LOCAL in .symtab.
      if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
        continue;
      const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
      if (name == nullptr) file.fail("cannot read a symbol name", true);
      const AllocatorFunction* function = find_allocator_function(name);
      if (function == nullptr) continue;
      auto section = std::find_if(code_sections.begin(), code_sections.end(),
                                  [&](const CodeSection& s) {
                                    return sym.st_value >= s.addr && sym.st_value - s.addr < s.size;
                                  });
      if (section == code_sections.end()) continue;
      uint64_t offset = sym.st_value - section->addr + section->offset;
      Candidate& c = by_offset[offset];
      c.section = &*section;
      c.vaddr = sym.st_value;
      if (c.size == 0) c.size = sym.st_size;
      if (std::find(c.names.begin(), c.names.end(), function) == c.names.end())
        c.names.push_back(function);
    }
  }

  std::vector<ProbeSite> sites;
  // A file with C++ operators but no allocator of its own (libstdc++, a
  // program's own operator new) gets its memory from an external malloc,
  // which is probed and records the allocation. Its operators stay unprobed:
  // no return probe is needed on a function that may throw. The unwinder's
  // entry points are probed wherever they are.
  auto is_operator = [](const AllocatorFunction* f) { return f->name.starts_with("_Z"); };
  bool has_own_allocator = std::any_of(by_offset.begin(), by_offset.end(), [&](const auto& entry) {
    return std::any_of(entry.second.names.begin(), entry.second.names.end(), [&](const AllocatorFunction* f) {
      return !is_operator(f) && MT_COOKIE_KIND(f->cookie) != MT_UNWIND;
    });
  });
  if (!has_own_allocator) {
    std::erase_if(by_offset, [&](const auto& entry) {
      return std::any_of(entry.second.names.begin(), entry.second.names.end(), is_operator);
    });
  }
  const std::vector<std::string> sonames = file.dynamic_strings(DT_SONAME);
  const bool glibc_shared = std::find(sonames.begin(), sonames.end(), "libc.so.6") != sonames.end();
  uint64_t code_start = UINT64_MAX, code_end = 0;
  for (const CodeSection& s : code_sections) {
    code_start = std::min(code_start, s.addr);
    code_end = std::max(code_end, s.addr + s.size);
  }
  InstructionDecoder decoder;
  std::vector<uint8_t> code;
  for (auto& [offset, c] : by_offset) {
    uint64_t start = c.vaddr - c.section->addr;
    if (start >= c.section->size) file.fail("a symbol lies past its section's data");
    // Without a size only the entry instruction is decoded (at most 15 bytes).
    const uint64_t left = c.section->size - start;
    FunctionExtent extent = c.size != 0 && c.size <= left ? FunctionExtent::whole : FunctionExtent::unknown_end;
    file.read_bytes(offset, extent == FunctionExtent::whole ? c.size : std::min<uint64_t>(left, 16), code);
    std::sort(c.names.begin(), c.names.end(),
              [](const AllocatorFunction* a, const AllocatorFunction* b) { return a->rank < b->rank; });
    const AllocatorFunction& best = *c.names.front();
    ProbePlacement placement = choose_probe_offset(decoder, code, extent, arguments_read(best.cookie));

    ProbeSite site{best.name, {}, offset, offset + placement.offset, best.cookie,
                   MT_COOKIE_KIND(best.cookie) != MT_FREE && MT_COOKIE_KIND(best.cookie) != MT_UNWIND,
                   std::move(placement.reason)};
    for (std::size_t i = 1; i < c.names.size(); ++i) site.aliases.push_back(c.names[i]->name);
    if (glibc_shared && MT_COOKIE_KIND(best.cookie) == MT_FREE)
      site.runtime_free_bits = runtime_free_bits(c.vaddr, placement.offset, code_start, code_end);
    sites.push_back(std::move(site));
  }
  return sites;
}

}  // namespace memtrack
