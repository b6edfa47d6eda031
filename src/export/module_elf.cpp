#include "export/module_elf.h"

#include <elf.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string_view>

namespace memtrack {

namespace {

struct ElfCloser {
  void operator()(Elf* elf) const { elf_end(elf); }
};
using ElfHandle = std::unique_ptr<Elf, ElfCloser>;

[[noreturn]] void fail(std::string_view what) {
  const char* detail = elf_errmsg(-1);
  throw std::runtime_error(std::string(what) + (detail ? std::string(": ") + detail : std::string()));
}

// ARM and AArch64 mark code/data boundaries with "$a", "$d", "$t", "$x",
// optionally followed by ".<anything>": not functions.
bool is_mapping_symbol(std::string_view name) {
  return name.size() >= 2 && name[0] == '$' && std::strchr("adtx", name[1]) != nullptr &&
         (name.size() == 2 || name[2] == '.');
}

// The GNU build id among the notes of `data`, or empty.
std::vector<uint8_t> build_id_in(Elf_Data* data) {
  GElf_Nhdr note;
  size_t offset = 0, name_at = 0, desc_at = 0;
  while (data && offset < data->d_size &&
         (offset = gelf_getnote(data, offset, &note, &name_at, &desc_at)) > 0) {
    const auto* bytes = static_cast<const uint8_t*>(data->d_buf);
    if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(bytes + name_at, "GNU", 4) == 0)
      return {bytes + desc_at, bytes + desc_at + note.n_descsz};
  }
  return {};
}

std::vector<uint8_t> read_build_id(Elf* elf, const std::vector<GElf_Phdr>& phdrs) {
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE) continue;
    auto id = build_id_in(elf_getdata(scn, nullptr));
    if (!id.empty()) return id;
  }
  // Files without section headers still have their PT_NOTE segments.
  for (const GElf_Phdr& phdr : phdrs) {
    if (phdr.p_type != PT_NOTE) continue;
    auto id = build_id_in(
        elf_getdata_rawchunk(elf, static_cast<int64_t>(phdr.p_offset), phdr.p_filesz,
                             phdr.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR));
    if (!id.empty()) return id;
  }
  return {};
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

// Name, then the CRC at the next 4-byte boundary, in the file's byte order.
std::optional<DebugLink> parse_debug_link(const SectionBytes& section, bool big_endian) {
  const auto& b = section.bytes;
  auto nul = std::find(b.begin(), b.end(), uint8_t{0});
  if (nul == b.begin() || nul == b.end()) return std::nullopt;
  size_t crc_at = (static_cast<size_t>(nul - b.begin()) + 4) & ~size_t{3};
  if (crc_at + 4 > b.size()) return std::nullopt;
  uint32_t crc = 0;
  for (int i = 0; i < 4; ++i) {
    uint32_t byte = b[crc_at + (big_endian ? i : 3 - i)];
    crc = crc << 8 | byte;
  }
  return DebugLink{std::string(b.begin(), nul), crc};
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

ElfModule read_elf_module(int fd) {
  if (elf_version(EV_CURRENT) == EV_NONE) fail("libelf initialisation failed");
  struct stat st {};
  if (fstat(fd, &st) != 0) throw std::runtime_error(std::string("fstat: ") + std::strerror(errno));
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  ElfHandle handle(elf_begin(fd, ELF_C_READ_MMAP, nullptr));
  Elf* elf = handle.get();
  if (!elf || elf_kind(elf) != ELF_K_ELF) fail("not an ELF file");
  GElf_Ehdr ehdr;
  if (!gelf_getehdr(elf, &ehdr)) fail("cannot read the ELF header");

  ElfModule module;
  std::vector<GElf_Phdr> phdrs;
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0) fail("cannot read the program headers");
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (!gelf_getphdr(elf, static_cast<int>(i), &phdr)) fail("cannot read a program header");
    phdrs.push_back(phdr);
    if (phdr.p_type == PT_LOAD)
      module.load_segments.push_back({phdr.p_vaddr, phdr.p_offset, phdr.p_filesz, phdr.p_memsz, phdr.p_flags});
  }
  module.build_id = read_build_id(elf, phdrs);

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
      module.eh_frame = section_bytes(scn, shdr, file_size);
    } else if (name == ".eh_frame_hdr") {
      module.eh_frame_hdr = section_bytes(scn, shdr, file_size);
    } else if (name == ".debug_frame") {
      module.debug_frame = section_bytes(scn, shdr, file_size);
    } else if (name == ".gnu_debuglink") {
      if (auto bytes = section_bytes(scn, shdr, file_size))
        module.debug_link = parse_debug_link(*bytes, ehdr.e_ident[EI_DATA] == ELFDATA2MSB);
    }
  }
  return module;
}

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
