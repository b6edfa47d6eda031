#include "record/probes/allocator_symbols.h"

#include <gelf.h>

#include <algorithm>
#include <array>
#include <map>
#include <span>
#include <unordered_map>

#include "module/elf_file.h"
#include "record/probes/probe_placement.h"
#include "wire/allocators.h"

namespace memtrack {
namespace {

struct Spec {
  std::string_view name;
  uint64_t cookie;
};

// The catalogue's lists (wire/allocators.h), in the order of their ranks.
#define MT_SPEC(name, cookie) Spec{#name, cookie},
constexpr std::array kLibc = {MT_ALLOCATORS_LIBC(MT_SPEC)};
constexpr std::array kJemallocExtensions = {MT_ALLOCATORS_JEMALLOC(MT_SPEC)};
constexpr std::array kCxx = {MT_ALLOCATORS_CXX(MT_SPEC)};
constexpr std::array kMimalloc = {MT_ALLOCATORS_MIMALLOC(MT_SPEC)};
constexpr std::array kTcmalloc = {MT_ALLOCATORS_TCMALLOC(MT_SPEC)};
constexpr std::array kCompat = {MT_ALLOCATORS_COMPAT(MT_SPEC)};
constexpr std::array kUnwinder = {MT_ALLOCATORS_UNWINDER(MT_SPEC)};
#undef MT_SPEC

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
// (wire/probe_cookie.h). In a static executable the program's calls are direct too: never
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
