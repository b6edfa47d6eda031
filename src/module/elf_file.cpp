#include "module/elf_file.h"

#include <elf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "io/untrusted_file.h"

namespace memtrack {

namespace {

// libelf's last error, ": <message>", or empty when there is none (a file
// that is simply not ELF is no libelf error).
std::string libelf_error() {
  const int error = elf_errno();
  return error != 0 ? std::string(": ") + elf_errmsg(error) : std::string();
}

// The GNU build id among the notes of `data`, or empty.
std::vector<uint8_t> build_id_in(Elf_Data* data) {
  GElf_Nhdr note;
  size_t offset = 0, name_at = 0, desc_at = 0;
  while (data && data->d_buf && offset < data->d_size &&
         (offset = gelf_getnote(data, offset, &note, &name_at, &desc_at)) > 0) {
    const auto* bytes = static_cast<const uint8_t*>(data->d_buf);
    if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(bytes + name_at, "GNU", 4) == 0)
      return {bytes + desc_at, bytes + desc_at + note.n_descsz};
  }
  return {};
}

UntrustedFile open_untrusted(const std::string& path) {
  try {
    return UntrustedFile::open(path, kAnySize);  // mapped by libelf, not read: any size
  } catch (const UntrustedFileError& e) {
    throw ElfError(path, e.reason(), e.error_number());
  }
}

}  // namespace

ElfFile::ElfFile(const std::string& path) : ElfFile(open_untrusted(path)) {}

ElfFile::ElfFile(UntrustedFile file) : path_(file.path()), size_(file.size()) {
  fd_ = file.release();
  open_elf();
}

ElfFile::ElfFile(std::string name, std::vector<char> image) : path_(std::move(name)), image_(std::move(image)) {
  size_ = image_.size();
  open_elf();
}

void ElfFile::open_elf() {
  static const bool version_ok = elf_version(EV_CURRENT) != EV_NONE;
  if (!version_ok) {
    if (fd_ >= 0) ::close(fd_);
    fail("libelf is unusable");
  }
  // Mapped, not read: libraries can be large and only a few sections are
  // looked at. Code bytes are not read through the mapping (read_bytes).
  elf_ = fd_ >= 0 ? elf_begin(fd_, ELF_C_READ_MMAP, nullptr) : elf_memory(image_.data(), image_.size());
  size_t sections = 0;
  if (!elf_ || elf_kind(elf_) != ELF_K_ELF || elf_getshdrnum(elf_, &sections) != 0) {
    const std::string reason = "not an ELF file" + libelf_error();
    if (elf_) elf_end(elf_);
    if (fd_ >= 0) ::close(fd_);
    throw ElfError(path_, reason);
  }
}

ElfFile::~ElfFile() {
  elf_end(elf_);
  if (fd_ >= 0) ::close(fd_);
}

void ElfFile::fail(std::string_view what, bool with_libelf_error) const {
  throw ElfError(path_, std::string(what) + (with_libelf_error ? libelf_error() : std::string()));
}

void ElfFile::read_bytes(uint64_t offset, uint64_t size, std::vector<uint8_t>& out) const {
  if (offset > size_ || size_ - offset < size) fail("bytes " + std::to_string(offset) + "+" + std::to_string(size) + " lie past the end of the file");
  out.resize(size);
  if (fd_ < 0) {
    std::memcpy(out.data(), image_.data() + offset, size);
    return;
  }
  for (uint64_t done = 0; done < size;) {
    ssize_t got = ::pread(fd_, out.data() + done, size - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(std::string("cannot read: ") + std::strerror(errno));
    if (got == 0) fail("the file shrank while being read");
    done += static_cast<uint64_t>(got);
  }
}

bool ElfFile::in_file(const GElf_Shdr& header) const {
  return header.sh_type == SHT_NOBITS || (header.sh_offset <= size_ && size_ - header.sh_offset >= header.sh_size);
}

std::string ElfFile::truncated_section() const {
  size_t names = 0;
  if (elf_getshdrstrndx(elf_, &names) != 0) return "section names";
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn; scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr header;
    if (!gelf_getshdr(scn, &header)) return "section headers";
    if (!in_file(header)) {
      const char* name = elf_strptr(elf_, names, header.sh_name);
      return name ? name : "a section";
    }
  }
  return {};
}

Elf_Scn* ElfFile::section(const char* name, GElf_Shdr* header) const {
  size_t names = 0;
  if (elf_getshdrstrndx(elf_, &names) != 0) return nullptr;
  // The names table itself must be in the file before elf_strptr reads it.
  GElf_Shdr names_header;
  Elf_Scn* names_scn = elf_getscn(elf_, names);
  if (!names_scn || !gelf_getshdr(names_scn, &names_header) || !in_file(names_header)) return nullptr;
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn; scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr h;
    if (!gelf_getshdr(scn, &h)) continue;
    const char* n = elf_strptr(elf_, names, h.sh_name);
    if (!n || std::strcmp(n, name) != 0) continue;
    if (h.sh_type == SHT_NOBITS || h.sh_size == 0 || !in_file(h)) return nullptr;
    if (header) *header = h;
    return scn;
  }
  return nullptr;
}

std::vector<uint8_t> ElfFile::build_id() const {
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn; scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr h;
    if (!gelf_getshdr(scn, &h) || h.sh_type != SHT_NOTE || !in_file(h)) continue;
    auto id = build_id_in(elf_getdata(scn, nullptr));
    if (!id.empty()) return id;
  }
  // Files without section headers still have their PT_NOTE segments.
  size_t count = 0;
  if (elf_getphdrnum(elf_, &count) != 0) return {};
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr p;
    if (!gelf_getphdr(elf_, static_cast<int>(i), &p) || p.p_type != PT_NOTE) continue;
    if (p.p_offset > size_ || size_ - p.p_offset < p.p_filesz) continue;
    auto id = build_id_in(elf_getdata_rawchunk(elf_, static_cast<int64_t>(p.p_offset), p.p_filesz,
                                               p.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR));
    if (!id.empty()) return id;
  }
  return {};
}

std::vector<LoadSegment> ElfFile::load_segments() const {
  std::vector<LoadSegment> out;
  size_t count = 0;
  if (elf_getphdrnum(elf_, &count) != 0) return out;
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr p;
    if (gelf_getphdr(elf_, static_cast<int>(i), &p) && p.p_type == PT_LOAD)
      out.push_back({p.p_vaddr, p.p_offset, p.p_filesz, p.p_memsz, p.p_flags});
  }
  return out;
}

std::optional<DebugLink> ElfFile::debug_link() const {
  Elf_Scn* scn = section(".gnu_debuglink");
  Elf_Data* data = scn ? elf_getdata(scn, nullptr) : nullptr;
  if (!data || !data->d_buf) return std::nullopt;
  // Name, NUL, padding to 4 bytes, then the CRC in the file's byte order
  // (libelf converts ELF_T_WORD data, not this ELF_T_BYTE section).
  const auto* b = static_cast<const uint8_t*>(data->d_buf);
  const auto* nul = static_cast<const uint8_t*>(std::memchr(b, 0, data->d_size));
  if (!nul || nul == b) return std::nullopt;
  const size_t crc_at = (static_cast<size_t>(nul - b) + 4) & ~size_t{3};
  if (crc_at + 4 > data->d_size) return std::nullopt;
  const bool big_endian = elf_getident(elf_, nullptr)[EI_DATA] == ELFDATA2MSB;
  uint32_t crc = 0;
  for (int i = 0; i < 4; ++i) crc = crc << 8 | b[crc_at + (big_endian ? i : 3 - i)];
  return DebugLink{std::string(reinterpret_cast<const char*>(b), static_cast<size_t>(nul - b)), crc};
}

std::vector<std::string> ElfFile::dynamic_strings(int64_t tag) const {
  std::vector<std::string> strings;
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn; scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_DYNAMIC || !in_file(shdr)) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data || shdr.sh_entsize == 0) continue;
    for (size_t i = 0; i < data->d_size / shdr.sh_entsize; ++i) {
      GElf_Dyn dyn;
      if (!gelf_getdyn(data, static_cast<int>(i), &dyn) || dyn.d_tag != tag) continue;
      if (const char* name = elf_strptr(elf_, shdr.sh_link, dyn.d_un.d_val)) strings.emplace_back(name);
    }
  }
  return strings;
}

std::optional<uint64_t> ElfFile::dynamic_symbol_offset(std::string_view name) const {
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn; scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_DYNSYM || shdr.sh_entsize == 0 || !in_file(shdr)) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data) return std::nullopt;
    for (size_t i = 0; i < data->d_size / shdr.sh_entsize; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym) || sym.st_shndx == SHN_UNDEF) continue;
      const char* symbol = elf_strptr(elf_, shdr.sh_link, sym.st_name);
      if (!symbol || name != symbol) continue;
      Elf_Scn* code = elf_getscn(elf_, sym.st_shndx);
      GElf_Shdr code_header;
      if (!code || !gelf_getshdr(code, &code_header)) return std::nullopt;
      return sym.st_value - code_header.sh_addr + code_header.sh_offset;
    }
  }
  return std::nullopt;
}

}  // namespace memtrack
