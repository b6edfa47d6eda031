#include "module/module_elf.h"

#include <elf.h>
#include <gelf.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string_view>

namespace memtrack {

namespace {

// ARM and AArch64 mark code/data boundaries with "$a", "$d", "$t", "$x",
// optionally followed by ".<anything>": not functions.
bool is_mapping_symbol(std::string_view name) {
  return name.size() >= 2 && name[0] == '$' && std::strchr("adtx", name[1]) != nullptr &&
         (name.size() == 2 || name[2] == '.');
}

std::optional<SectionBytes> section_bytes(Elf_Scn* scn, const GElf_Shdr& shdr, uint64_t file_size) {
  if (shdr.sh_type == SHT_NOBITS || shdr.sh_size == 0) return std::nullopt;
  // libelf would read past the end of a truncated file's mapping.
  if (shdr.sh_offset > file_size || file_size - shdr.sh_offset < shdr.sh_size) return std::nullopt;
  if ((shdr.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0) return std::nullopt;
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (!data || !data->d_buf || data->d_size == 0) return std::nullopt;
  const auto* bytes = static_cast<const uint8_t*>(data->d_buf);
  return SectionBytes{shdr.sh_addr, {bytes, bytes + data->d_size}};
}

void read_symbols(Elf* elf, Elf_Scn* scn, const GElf_Shdr& shdr, std::vector<FunctionSymbol>& out) {
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (!data || shdr.sh_entsize == 0) return;
  const size_t count = data->d_size / gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
  for (size_t i = 1; i < count; ++i) {  // entry 0 is the null symbol
    GElf_Sym sym;
    if (!gelf_getsym(data, static_cast<int>(i), &sym)) break;
    const int type = GELF_ST_TYPE(sym.st_info);
    if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF) continue;
    const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
    if (!name || !*name || is_mapping_symbol(name)) continue;
    out.push_back({sym.st_value, sym.st_size, name});
  }
}

}  // namespace

ElfModule read_elf_module(const ElfFile& file) {
  Elf* elf = file.elf();
  GElf_Ehdr ehdr;
  if (!gelf_getehdr(elf, &ehdr)) file.fail("cannot read the ELF header", true);

  ElfModule module;
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0) file.fail("cannot read the program headers", true);
  for (size_t i = 0; i < phnum; ++i) {  // load_segments() would skip an unreadable one
    GElf_Phdr phdr;
    if (!gelf_getphdr(elf, static_cast<int>(i), &phdr)) file.fail("cannot read a program header", true);
  }
  module.load_segments = file.load_segments();
  module.build_id = file.build_id();
  module.debug_link = file.debug_link();

  size_t shstrndx = 0;
  // A file stripped of its section headers (sstrip) has none of the rest.
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return module;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr)) continue;
    if (shdr.sh_type == SHT_SYMTAB || shdr.sh_type == SHT_DYNSYM) {
      read_symbols(elf, scn, shdr, module.symbols);
      continue;
    }
    const char* name_ptr = elf_strptr(elf, shstrndx, shdr.sh_name);
    const std::string_view name = name_ptr ? name_ptr : "";
    if (name == ".eh_frame") {
      module.eh_frame = section_bytes(scn, shdr, file.file_size());
    } else if (name == ".eh_frame_hdr") {
      module.eh_frame_hdr = section_bytes(scn, shdr, file.file_size());
    } else if (name == ".debug_frame") {
      module.debug_frame = section_bytes(scn, shdr, file.file_size());
    }
  }
  return module;
}

ElfModule read_elf_module(const std::string& path) { return read_elf_module(ElfFile(path)); }

std::vector<FunctionSymbol> symbol_map(std::vector<FunctionSymbol> symbols) {
  std::sort(symbols.begin(), symbols.end(), [](const FunctionSymbol& a, const FunctionSymbol& b) {
    if (a.address != b.address) return a.address < b.address;
    if (a.name != b.name) return a.name < b.name;
    return a.size > b.size;  // the largest first: unique() keeps it
  });
  symbols.erase(std::unique(symbols.begin(), symbols.end(),
                            [](const FunctionSymbol& a, const FunctionSymbol& b) {
                              return a.address == b.address && a.name == b.name;
                            }),
                symbols.end());
  for (auto it = symbols.begin(); it != symbols.end(); ++it) {
    if (it->size != 0) continue;
    auto next = std::upper_bound(it, symbols.end(), it->address,
                                 [](uint64_t address, const FunctionSymbol& s) { return address < s.address; });
    it->size = next != symbols.end() ? next->address - it->address
                                     : (it->address + 4095) / 4096 * 4096 + 4096 - it->address;
  }
  return symbols;
}

std::optional<uint64_t> load_bias(const std::vector<LoadSegment>& segments, uint64_t start, uint64_t file_offset,
                                  bool executable, uint64_t page_size) {
  const LoadSegment* chosen = nullptr;
  for (const LoadSegment& segment : segments) {
    const uint64_t first_page = segment.offset & ~(page_size - 1);
    const uint64_t span = segment.filesz + (segment.offset - first_page);  // bytes from first_page
    if (file_offset < first_page || file_offset - first_page >= span) continue;
    const bool preferred = executable && (segment.flags & PF_X) && !(chosen && (chosen->flags & PF_X));
    if (!chosen || preferred) chosen = &segment;
  }
  // Unsigned wrap-around gives the right bias when file_offset < p_offset.
  if (!chosen) return std::nullopt;
  return start - (chosen->vaddr + file_offset - chosen->offset);
}

}  // namespace memtrack
