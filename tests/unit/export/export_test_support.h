// Expected values for the export-modules tests, found independently of
// src/export: ELF facts read here with libelf, function symbols listed by
// binutils' nm, and readers of what export-modules wrote.
#pragma once

#include <gelf.h>
#include <libelf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "support/test_support.h"

namespace memtrack::testing {

inline std::string hex_bytes(const std::vector<uint8_t>& bytes) {
  std::string text;
  char buf[3];
  for (uint8_t b : bytes) {
    std::snprintf(buf, sizeof(buf), "%02x", b);
    text += buf;
  }
  return text;
}

inline std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_whole_file(path)); }

// What libelf says about one ELF file.
class ElfFacts {
 public:
  explicit ElfFacts(const std::string& path) {
    elf_version(EV_CURRENT);
    fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw std::runtime_error("cannot open " + path);
    elf_ = elf_begin(fd_, ELF_C_READ, nullptr);
    if (!elf_ || elf_kind(elf_) != ELF_K_ELF) throw std::runtime_error(path + " is not ELF");
  }
  ~ElfFacts() {
    elf_end(elf_);
    close(fd_);
  }
  ElfFacts(const ElfFacts&) = delete;
  ElfFacts& operator=(const ElfFacts&) = delete;

  // The NT_GNU_BUILD_ID note of the .note.gnu.build-id section.
  std::vector<uint8_t> build_id() const {
    auto section = find(".note.gnu.build-id");
    if (!section) throw std::runtime_error("no .note.gnu.build-id");
    Elf_Data* data = elf_getdata(*section, nullptr);
    GElf_Nhdr note;
    size_t name_at = 0, desc_at = 0;
    if (gelf_getnote(data, 0, &note, &name_at, &desc_at) == 0 || note.n_type != NT_GNU_BUILD_ID)
      throw std::runtime_error("no build id note");
    const auto* bytes = static_cast<const uint8_t*>(data->d_buf);
    return {bytes + desc_at, bytes + desc_at + note.n_descsz};
  }

  // (address, bytes) of a section with contents.
  std::optional<std::pair<uint64_t, std::string>> section(const std::string& name) const {
    auto scn = find(name);
    if (!scn) return std::nullopt;
    GElf_Shdr shdr;
    gelf_getshdr(*scn, &shdr);
    Elf_Data* data = elf_rawdata(*scn, nullptr);
    return std::pair{shdr.sh_addr, std::string(static_cast<const char*>(data->d_buf), data->d_size)};
  }

  std::vector<GElf_Phdr> loads() const {
    std::vector<GElf_Phdr> out;
    size_t count = 0;
    elf_getphdrnum(elf_, &count);
    for (size_t i = 0; i < count; ++i) {
      GElf_Phdr phdr;
      gelf_getphdr(elf_, static_cast<int>(i), &phdr);
      if (phdr.p_type == PT_LOAD) out.push_back(phdr);
    }
    return out;
  }

  // The one executable PT_LOAD.
  GElf_Phdr code_segment() const {
    for (const GElf_Phdr& phdr : loads())
      if (phdr.p_flags & PF_X) return phdr;
    throw std::runtime_error("no executable PT_LOAD");
  }

  nlohmann::json load_segments_json() const {
    nlohmann::json segments = nlohmann::json::array();
    for (const GElf_Phdr& p : loads())
      segments.push_back({{"vaddr", p.p_vaddr}, {"offset", p.p_offset}, {"filesz", p.p_filesz},
                          {"memsz", p.p_memsz}, {"flags", p.p_flags}});
    return segments;
  }

 private:
  std::optional<Elf_Scn*> find(const std::string& name) const {
    size_t shstrndx = 0;
    elf_getshdrstrndx(elf_, &shstrndx);
    for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn; scn = elf_nextscn(elf_, scn)) {
      GElf_Shdr shdr;
      gelf_getshdr(scn, &shdr);
      const char* section_name = elf_strptr(elf_, shstrndx, shdr.sh_name);
      if (section_name && name == section_name) return scn;
    }
    return std::nullopt;
  }

  int fd_ = -1;
  Elf* elf_ = nullptr;
};

struct MapLine {
  uint64_t address = 0;
  uint64_t size = 0;
  std::string name;
  auto operator<=>(const MapLine&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const MapLine& line) {
  return os << std::hex << line.address << " " << line.size << std::dec << " " << line.name;
}

// Defined function symbols (FUNC, and IFUNC: class "i") as nm lists them,
// from .symtab or, with `dynamic`, from .dynsym, without the "@VERSION" nm
// appends there (.symtab names such as "f@@V_1" are names as written); size
// 0 when nm gives none.
inline std::vector<MapLine> nm_functions(const std::string& path, bool dynamic) {
  std::vector<std::string> argv = {NM_TOOL, "-f", "sysv", "--defined-only"};
  if (dynamic) argv.push_back("-D");
  argv.push_back(path);
  RunResult run = run_process(argv, std::chrono::seconds(30));
  if (run.exit_code() != 0) throw std::runtime_error("nm failed: " + run.err);
  std::vector<MapLine> out;
  std::istringstream lines(run.out);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> fields;
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, '|');) {
      cell.erase(0, cell.find_first_not_of(' '));
      cell.erase(cell.find_last_not_of(' ') + 1);
      fields.push_back(cell);
    }
    if (fields.size() < 5 || (fields[3] != "FUNC" && fields[2] != "i")) continue;
    MapLine symbol;
    symbol.name = dynamic ? fields[0].substr(0, fields[0].find('@')) : fields[0];
    symbol.address = std::stoull(fields[1], nullptr, 16);
    symbol.size = fields[4].empty() ? 0 : std::stoull(fields[4], nullptr, 16);
    out.push_back(symbol);
  }
  return out;
}

// A symbols.map file, line by line; fails on a malformed line.
inline std::vector<MapLine> read_symbols_map(const std::string& path) {
  std::vector<MapLine> out;
  std::istringstream lines(read_whole_file(path));
  for (std::string line; std::getline(lines, line);) {
    MapLine symbol;
    char name[4096];
    if (std::sscanf(line.c_str(), "%" SCNx64 " %" SCNx64 " %4095s", &symbol.address, &symbol.size, name) != 3)
      throw std::runtime_error(path + ": malformed line: " + line);
    symbol.name = name;
    out.push_back(symbol);
  }
  return out;
}

}  // namespace memtrack::testing
