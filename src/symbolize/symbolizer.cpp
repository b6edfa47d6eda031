#include "symbolize/symbolizer.h"

#include <dwarf.h>
#include <elfutils/libdw.h>

#include <algorithm>
#include <map>
#include <optional>
#include <thread>
#include <unordered_map>

#include "module/elf_file.h"
#include "util/bounded_queue.h"

namespace memtrack {

namespace {

// A function symbol; the name points into the ELF file's string table (kept
// mapped) or into the embedded module's strings.
struct Symbol {
  uint64_t address = 0;
  uint64_t size = 0;
  std::string_view name;
  int rank = 0;  // lower is preferred among aliases: global, weak, local
  uint64_t section_end = UINT64_MAX;  // a size of zero is extended no further
};

// One address range of a compilation unit.
struct CuRange {
  uint64_t low = 0, high = 0;
  Dwarf_Die cu;
};

// One address range of an out-of-line function (DW_TAG_subprogram).
struct FunctionRange {
  uint64_t low = 0, high = 0;
  Dwarf_Die die;
};

int binding_rank(unsigned char binding) { return binding == STB_GLOBAL ? 0 : binding == STB_WEAK ? 1 : 2; }

// Sorted by address, one symbol per address (the preferred alias), sizes of
// zero extended to the next symbol (perf's rule; assembly functions often
// have no size), within the symbol's section (_init is not followed by code
// of its own).
void finish_symbols(std::vector<Symbol>& symbols) {
  std::sort(symbols.begin(), symbols.end(), [](const Symbol& a, const Symbol& b) {
    return a.address != b.address ? a.address < b.address
           : a.rank != b.rank     ? a.rank < b.rank
                                  : a.size > b.size;
  });
  symbols.erase(std::unique(symbols.begin(), symbols.end(),
                            [](const Symbol& a, const Symbol& b) { return a.address == b.address; }),
                symbols.end());
  for (size_t i = 0; i < symbols.size(); ++i)
    if (symbols[i].size == 0)
      symbols[i].size = std::min(i + 1 < symbols.size() ? symbols[i + 1].address : symbols[i].address + 4096,
                                 std::max(symbols[i].section_end, symbols[i].address)) -
                        symbols[i].address;
}

// Defined STT_FUNC / STT_GNU_IFUNC symbols of the first section of `type`.
std::vector<Symbol> read_symbols(const ElfFile& file, Elf64_Word type) {
  std::vector<Symbol> out;
  Elf* elf = file.elf();
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr header, strings_header;
    if (!gelf_getshdr(scn, &header) || header.sh_type != type) continue;
    Elf_Scn* strings = elf_getscn(elf, header.sh_link);
    if (!file.in_file(header) || !strings || !gelf_getshdr(strings, &strings_header) ||
        !file.in_file(strings_header))
      return out;
    Elf_Data* data = elf_getdata(scn, nullptr);
    const size_t entry = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
    if (!data || entry == 0) return out;
    for (size_t i = 1; i < data->d_size / entry; ++i) {  // entry 0 is the null symbol
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym)) break;
      const int kind = GELF_ST_TYPE(sym.st_info);
      if ((kind != STT_FUNC && kind != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF) continue;
      const char* name = elf_strptr(elf, header.sh_link, sym.st_name);
      if (!name || !*name) continue;
      std::string_view view(name);
      view = view.substr(0, view.find('@'));  // .symtab names may carry a version: malloc@@GLIBC_2.2.5
      GElf_Shdr section;
      Elf_Scn* in = sym.st_shndx < SHN_LORESERVE ? elf_getscn(elf, sym.st_shndx) : nullptr;
      const uint64_t section_end =
          in && gelf_getshdr(in, &section) ? section.sh_addr + section.sh_size : UINT64_MAX;
      out.push_back({sym.st_value, sym.st_size, view, binding_rank(GELF_ST_BIND(sym.st_info)), section_end});
    }
    return out;
  }
  return out;
}

const char* string_attr(Dwarf_Die* die, unsigned name) {
  Dwarf_Attribute attr;
  return dwarf_formstring(dwarf_attr_integrate(die, name, &attr));
}

// GCC writes an asm label that needs quoting in assembly (`asm("\"a<b>\"")`)
// as the linkage name verbatim: quotes and backslash escapes included. The
// symbol gas makes of it, and so the function's name, is the text inside.
std::string asm_label_symbol(std::string_view quoted) {
  std::string symbol;
  for (std::size_t i = 1; i < quoted.size() && quoted[i] != '"'; ++i) {
    if (quoted[i] == '\\' && i + 1 < quoted.size()) ++i;
    symbol += quoted[i];
  }
  return symbol;
}

// The qualified name of a function DIE (through its abstract origin or
// specification): its demangled linkage name; empty without one.
std::string linkage_name(Dwarf_Die* die) {
  const char* linkage = string_attr(die, DW_AT_linkage_name);
  if (!linkage) linkage = string_attr(die, DW_AT_MIPS_linkage_name);
  if (linkage && linkage[0] == '"') return asm_label_symbol(linkage);
  return linkage ? demangle(linkage) : "";
}

uint32_t udata_attr(Dwarf_Die* die, unsigned name) {
  Dwarf_Attribute attr;
  Dwarf_Word value = 0;
  if (dwarf_formudata(dwarf_attr(die, name, &attr), &value) != 0) return 0;
  return static_cast<uint32_t>(value);
}

}  // namespace

struct Symbolizer::Module {
  ModuleRef ref;
  bool opened = false;
  LocatedFile located;
  std::string warning;
  std::unique_ptr<ElfFile> file, debug;
  Dwarf* dwarf = nullptr;  // of `debug`, else of `file`; nullptr without DWARF
  std::vector<LoadSegment> segments;
  std::vector<Symbol> symbols;
  std::vector<CuRange> cus;  // sorted by low
  std::unordered_map<Dwarf_Off, std::vector<FunctionRange>> functions;  // by unit DIE offset
  // The enclosing namespaces and classes ("std::vector<int>::") of the
  // function DIEs seen while indexing units, by DIE offset: inlined C++
  // functions often have no linkage name, only their unqualified DW_AT_name.
  std::unordered_map<Dwarf_Off, uint32_t> scope_of_function;
  std::vector<std::string> scopes;  // interned prefixes
  std::unordered_map<std::string, uint32_t> scope_index;
  std::unordered_map<uint64_t, std::vector<SourceFrame>> cache;

  ~Module() {
    if (dwarf) dwarf_end(dwarf);
  }

  void open(const SymbolizerOptions& options);
  void index_units();
  std::optional<uint64_t> link_address(uint64_t file_offset) const;
  const Symbol* symbol_at(uint64_t address) const;
  Dwarf_Die* unit_at(uint64_t address);
  std::vector<FunctionRange>& functions_of(Dwarf_Die* cu);
  // DW_AT_name of an inline level's function, qualified by its scopes when
  // its unit has been indexed.
  std::string qualified_name(Dwarf_Die* inlined);
  std::vector<SourceFrame> frames_at(uint64_t address);
};

void Symbolizer::Module::open(const SymbolizerOptions& options) {
  opened = true;
  located = locate_module_file(ref, options);
  // Opened again here: the file may have gone since it was located.
  try {
    if (!located.path.empty()) file = std::make_unique<ElfFile>(located.path);
  } catch (const ElfError& e) {
    located.path.clear();
    located.problem = e.what();
  }
  try {
    if (!located.debug_path.empty()) debug = std::make_unique<ElfFile>(located.debug_path);
  } catch (const ElfError& e) {
    located.debug_path.clear();
    located.problem = e.what();
  }

  if (file) {
    segments = file->load_segments();
    symbols = read_symbols(*file, SHT_SYMTAB);
    if (symbols.empty() && debug) symbols = read_symbols(*debug, SHT_SYMTAB);
    if (symbols.empty()) symbols = read_symbols(*file, SHT_DYNSYM);
    finish_symbols(symbols);
    // libdw reads the debug sections through libelf's mapping: one extending
    // past the end of a truncated file would fault.
    ElfFile* dwarf_file = debug ? debug.get() : file.get();
    if (std::string truncated = dwarf_file->truncated_section(); !truncated.empty()) {
      warning = dwarf_file->path() + ": truncated (" + truncated + " extends past the end); no debug info used";
    } else if (dwarf_file->has_dwarf()) {
      dwarf = dwarf_begin_elf(dwarf_file->elf(), DWARF_C_READ, nullptr);
      if (!dwarf) warning = dwarf_file->path() + ": unreadable debug info (" + dwarf_errmsg(-1) + ")";
    }
    if (dwarf) index_units();
  } else if (ref.embedded) {
    segments = ref.embedded->load_segments;
    for (const auto& s : ref.embedded->symbols) symbols.push_back({s.address, s.size, s.name, 0});
    finish_symbols(symbols);
  }

  if (!warning.empty()) return;  // a truncated file or corrupt DWARF, said above
  const std::string& path = ref.path;
  if (!file)
    warning = path + ": " + located.problem +
              (ref.embedded ? "; function names from the recording's embedded symbols only" : "; not symbolized");
  else if (!dwarf)
    warning = path + (symbols.empty() ? ": no symbols and no debug info (" : ": function names only (") +
              located.problem + ")";
  else if (!located.problem.empty())
    warning = path + ": " + located.problem;  // e.g. not the inode that was mapped
}

// Address ranges of every compilation unit, from the units themselves:
// .debug_aranges is optional (clang omits it) and may be incomplete.
void Symbolizer::Module::index_units() {
  Dwarf_CU* unit = nullptr;
  Dwarf_CU* next = nullptr;
  Dwarf_Half version = 0;
  uint8_t unit_type = 0;
  Dwarf_Die cu, sub;
  while (dwarf_get_units(dwarf, unit, &next, &version, &unit_type, &cu, &sub) == 0) {
    unit = next;
    if (unit_type != DW_UT_compile && unit_type != DW_UT_partial) continue;
    Dwarf_Addr base = 0, low = 0, high = 0;
    ptrdiff_t offset = 0;
    while ((offset = dwarf_ranges(&cu, offset, &base, &low, &high)) > 0)
      if (low < high) cus.push_back({low, high, cu});
  }
  std::sort(cus.begin(), cus.end(), [](const CuRange& a, const CuRange& b) { return a.low < b.low; });
}

std::optional<uint64_t> Symbolizer::Module::link_address(uint64_t file_offset) const {
  // An executable segment first: a read-only one may end in the page where
  // the code begins (lld packs segments so).
  for (bool executable : {true, false})
    for (const auto& s : segments)
      if (bool(s.flags & PF_X) == executable && file_offset >= s.offset && file_offset - s.offset < s.filesz)
        return s.vaddr + (file_offset - s.offset);
  return std::nullopt;
}

const Symbol* Symbolizer::Module::symbol_at(uint64_t address) const {
  auto it = std::upper_bound(symbols.begin(), symbols.end(), address,
                             [](uint64_t a, const Symbol& s) { return a < s.address; });
  // A few steps back: a small symbol may sit inside a larger one.
  for (int steps = 0; it != symbols.begin() && steps < 8; ++steps) {
    --it;
    if (address - it->address < it->size) return &*it;
  }
  return nullptr;
}

Dwarf_Die* Symbolizer::Module::unit_at(uint64_t address) {
  auto it = std::upper_bound(cus.begin(), cus.end(), address,
                             [](uint64_t a, const CuRange& r) { return a < r.low; });
  for (int steps = 0; it != cus.begin() && steps < 8; ++steps) {
    --it;
    if (address < it->high) return &it->cu;
  }
  return nullptr;
}

// The out-of-line functions of a unit with their ranges, sorted by low:
// DW_TAG_subprogram DIEs at the unit's top level or in namespaces and types.
// Built once per unit touched, so a lookup never walks the whole unit (libdw
// takes a lock for every DIE it decodes).
std::vector<FunctionRange>& Symbolizer::Module::functions_of(Dwarf_Die* cu) {
  auto [it, inserted] = functions.try_emplace(dwarf_dieoffset(cu));
  if (!inserted) return it->second;
  std::vector<FunctionRange>& out = it->second;
  struct Container {
    Dwarf_Die die;
    std::string prefix;  // "ns::Class::"
  };
  std::vector<Container> containers = {{*cu, ""}};
  // Bounded: a corrupt unit cannot make the walk loop (libdw refuses
  // backward sibling references) or grow without limit.
  size_t budget = 1 << 22;
  while (!containers.empty() && budget > 0) {
    Container parent = std::move(containers.back());
    containers.pop_back();
    Dwarf_Die child;
    if (dwarf_child(&parent.die, &child) != 0) continue;
    do {
      const int tag = dwarf_tag(&child);
      if (tag == DW_TAG_subprogram) {
        Dwarf_Addr base = 0, low = 0, high = 0;
        ptrdiff_t offset = 0;
        while ((offset = dwarf_ranges(&child, offset, &base, &low, &high)) > 0)
          if (low < high) out.push_back({low, high, child});
        if (!parent.prefix.empty()) {
          auto [scope, added] = scope_index.try_emplace(parent.prefix, static_cast<uint32_t>(scopes.size()));
          if (added) scopes.push_back(parent.prefix);
          scope_of_function[dwarf_dieoffset(&child)] = scope->second;
        }
      } else if (tag == DW_TAG_namespace || tag == DW_TAG_class_type || tag == DW_TAG_structure_type ||
                 tag == DW_TAG_union_type || tag == DW_TAG_module) {
        const char* name = dwarf_diename(&child);
        std::string scope = name ? name : tag == DW_TAG_namespace ? "(anonymous namespace)" : "";
        // An unnamed class or struct qualifies nothing it contains.
        containers.push_back({child, scope.empty() ? parent.prefix : parent.prefix + scope + "::"});
      }
    } while (--budget > 0 && dwarf_siblingof(&child, &child) == 0);
  }
  std::sort(out.begin(), out.end(), [](const FunctionRange& a, const FunctionRange& b) { return a.low < b.low; });
  return out;
}

std::string Symbolizer::Module::qualified_name(Dwarf_Die* inlined) {
  const char* name = string_attr(inlined, DW_AT_name);
  if (!name) return "";
  // The function's own DIE: the abstract origin, then its declaration in
  // its class (DW_AT_specification), whose scope was recorded.
  Dwarf_Attribute attr;
  Dwarf_Die origin, declaration;
  Dwarf_Die* function = dwarf_formref_die(dwarf_attr(inlined, DW_AT_abstract_origin, &attr), &origin);
  for (int hops = 0; function && hops < 4; ++hops) {
    auto scope = scope_of_function.find(dwarf_dieoffset(function));
    if (scope != scope_of_function.end()) return scopes[scope->second] + name;
    function = dwarf_formref_die(dwarf_attr(function, DW_AT_specification, &attr), &declaration);
    if (function) origin = *function;
    function = function ? &origin : nullptr;
  }
  return name;
}

std::vector<SourceFrame> Symbolizer::Module::frames_at(uint64_t address) {
  std::vector<SourceFrame> frames;
  Dwarf_Die* cu = dwarf ? unit_at(address) : nullptr;
  if (cu) {
    // The innermost location from the line table; each inline level's call
    // site then gives the location in the next outer function.
    SourceFrame location;
    if (Dwarf_Line* line = dwarf_getsrc_die(cu, address)) {
      const char* file = dwarf_linesrc(line, nullptr, nullptr);
      int number = 0, column = 0;
      dwarf_lineno(line, &number);
      dwarf_linecol(line, &column);
      location.file = file ? file : "";
      location.line = static_cast<uint32_t>(std::max(number, 0));
      location.column = static_cast<uint32_t>(std::max(column, 0));
    }
    // The containing function, then down through its blocks to the
    // innermost inline instance holding the address: outermost first.
    std::vector<Dwarf_Die> chain;
    const auto& functions = functions_of(cu);
    auto it = std::upper_bound(functions.begin(), functions.end(), address,
                               [](uint64_t a, const FunctionRange& f) { return a < f.low; });
    for (int steps = 0; it != functions.begin() && steps < 8 && chain.empty(); ++steps) {
      --it;
      if (address < it->high) chain.push_back(it->die);
    }
    if (!chain.empty()) {
      Dwarf_Die scope = chain.back(), child;
      // Depth bounded: corrupt DWARF cannot make this loop.
      for (int depth = 0; depth < 256 && dwarf_child(&scope, &child) == 0; ++depth) {
        bool deeper = false;
        do {
          const int tag = dwarf_tag(&child);
          if ((tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block || tag == DW_TAG_try_block ||
               tag == DW_TAG_catch_block) &&
              dwarf_haspc(&child, address) == 1) {
            if (tag == DW_TAG_inlined_subroutine) chain.push_back(child);
            scope = child;
            deeper = true;
          }
        } while (!deeper && dwarf_siblingof(&child, &child) == 0);
        if (!deeper) break;
      }
    }
    const int language = dwarf_srclang(cu);
    const bool cplusplus = language == DW_LANG_C_plus_plus || language == DW_LANG_C_plus_plus_03 ||
                           language == DW_LANG_C_plus_plus_11 || language == DW_LANG_C_plus_plus_14;
    Dwarf_Files* files = nullptr;
    size_t file_count = 0;
    for (auto level = chain.rbegin(); level != chain.rend(); ++level) {
      SourceFrame frame = location;
      frame.inlined = level + 1 != chain.rend();
      // A C++ function without a linkage name (GCC leaves some members
      // without) has only its unqualified DW_AT_name: the symbol table's name
      // is preferred for the containing function. In C, DW_AT_name is the
      // name, where the symbol may be any of its aliases.
      frame.function = linkage_name(&*level);
      const Symbol* symbol = frame.inlined || !frame.function.empty() || !cplusplus ? nullptr : symbol_at(address);
      if (symbol) frame.function = demangle(symbol->name);
      if (frame.function.empty()) frame.function = qualified_name(&*level);
      frames.push_back(std::move(frame));
      if (!frames.back().inlined) break;
      location = SourceFrame{};
      location.line = udata_attr(&*level, DW_AT_call_line);
      location.column = udata_attr(&*level, DW_AT_call_column);
      Dwarf_Attribute attr;
      Dwarf_Word index = 0;
      if (dwarf_formudata(dwarf_attr(&*level, DW_AT_call_file, &attr), &index) == 0 &&
          (files || dwarf_getsrcfiles(cu, &files, &file_count) == 0) && index < file_count)
        if (const char* name = dwarf_filesrc(files, index, nullptr, nullptr)) location.file = name;
    }
    // No function DIE (e.g. a nested function, or bad references): the line
    // table's location in the function the symbol table names.
    if (frames.empty()) frames.push_back(location);
  }
  if (frames.empty()) frames.emplace_back();
  if (const Symbol* symbol = symbol_at(address)) {
    if (frames.back().function.empty()) frames.back().function = demangle(symbol->name);
    frames.back().symbol_offset = address - symbol->address;
  }
  if (frames.size() == 1 && frames[0] == SourceFrame{}) frames.clear();
  return frames;
}

// One thread opening the modules asked for, in order; its results are read
// after finish() joined it.
class Symbolizer::AheadOpener {
 public:
  explicit AheadOpener(const SymbolizerOptions& options) : options_(options), thread_([this] { run(); }) {}
  ~AheadOpener() {
    jobs_.shutdown();  // the modules not yet begun are not needed
    if (thread_.joinable()) thread_.join();
  }
  void add(ModuleRef ref) {
    ref.embedded = nullptr;  // the caller's, which it may replace meanwhile; a file not found is opened again
    jobs_.push(std::move(ref));
  }
  // Every module asked for, opened.
  std::map<ModuleIdentity, std::unique_ptr<Module>> finish() {
    jobs_.close();
    if (thread_.joinable()) thread_.join();
    return std::move(opened_);
  }

 private:
  void run() {
    while (std::optional<ModuleRef> ref = jobs_.pop()) {
      auto module = std::make_unique<Module>();
      module->ref = *ref;
      module->open(options_);
      opened_.emplace(ref->identity(), std::move(module));
    }
  }

  const SymbolizerOptions& options_;
  BoundedQueue<ModuleRef> jobs_{BoundedQueue<ModuleRef>::kUnbounded};
  std::map<ModuleIdentity, std::unique_ptr<Module>> opened_;  // the thread's until joined
  std::thread thread_;
};

Symbolizer::Symbolizer(SymbolizerOptions options) : options_(std::move(options)) {}
Symbolizer::~Symbolizer() = default;

void Symbolizer::open_ahead(const ModuleRef& module) {
  if (!ahead_) ahead_ = std::make_unique<AheadOpener>(options_);
  ahead_->add(module);
}

Symbolizer::ModuleId Symbolizer::add_module(const ModuleRef& module) {
  auto [it, inserted] = ids_.emplace(module.identity(), static_cast<ModuleId>(modules_.size()));
  if (inserted) {
    modules_.push_back(std::make_unique<Module>());
    modules_.back()->ref = module;
  }
  return it->second;
}

Symbolizer::Module& Symbolizer::open(ModuleId id) {
  if (ahead_) {
    opened_ahead_ = ahead_->finish();
    ahead_.reset();
  }
  if (modules_[id]->opened) return *modules_[id];
  auto ahead = opened_ahead_.find(modules_[id]->ref.identity());
  if (ahead != opened_ahead_.end() && ahead->second->file) {
    // Found on disk: the embedded record, which may have come since, is not used.
    ahead->second->ref = modules_[id]->ref;
    modules_[id] = std::move(ahead->second);
    opened_ahead_.erase(ahead);
  } else {
    modules_[id]->open(options_);
  }
  return *modules_[id];
}

const std::vector<SourceFrame>& Symbolizer::symbolize(ModuleId id, uint64_t file_offset) {
  static const std::vector<SourceFrame> kNothing;
  if (id >= modules_.size()) return kNothing;
  Module& module = open(id);
  auto [it, inserted] = module.cache.try_emplace(file_offset);
  if (inserted) {
    if (auto address = module.link_address(file_offset)) it->second = module.frames_at(*address);
  }
  return it->second;
}

const LocatedFile& Symbolizer::located(ModuleId id) {
  static const LocatedFile kUnknown{.path = {}, .debug_path = {}, .problem = "unknown module id"};
  return id < modules_.size() ? open(id).located : kUnknown;
}

std::vector<std::string> Symbolizer::warnings() const {
  std::vector<std::string> out;
  for (const auto& module : modules_)
    if (module->opened && !module->warning.empty()) out.push_back(module->warning);
  return out;
}

}  // namespace memtrack
