// Symbolizer against libfx_symbolize.so (loaded): addresses recorded by the
// fixture, turned into file offsets through /proc/self/maps, must give the
// functions, files and lines marked `@line:<name>` in its sources. Then its
// stripped copy with separate debug files, wrong identities, missing and
// corrupt files.
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <link.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fx_symbolize.h"
#include "support/build_file.h"
#include "support/test_support.h"
#include "symbolize/symbolizer.h"
#include "util/proc_maps.h"

namespace fxexe {
// A function of the executable (a PIE) rather than of a library.
__attribute__((noinline)) int caller(int x) {
  fx_capture(FX_SLOT_EXE); /* @line:exe_caller */
  return x + 2;
}
}  // namespace fxexe

namespace memtrack {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const std::string kTree = FX_DEBUG_TREE;
const std::string kStripped = kTree + "/stripped/" + FX_LIB_NAME;

// The line holding `/* @line:<name> */` in `path` (exactly one).
uint32_t marker_line(const std::string& path, const std::string& name) {
  std::ifstream in(path);
  const std::string marker = "/* @line:" + name + " */";
  std::string text;
  uint32_t number = 0, found = 0;
  for (uint32_t n = 1; std::getline(in, text); ++n)
    if (text.find(marker) != std::string::npos) {
      EXPECT_EQ(found, 0u) << "marker " << name << " twice in " << path;
      found = n;
      ++number;
    }
  EXPECT_EQ(number, 1u) << "marker " << name << " in " << path;
  return found;
}

// The mapping of this process holding `address`, from /proc/self/maps.
struct Mapped {
  std::string path;
  uint64_t offset = 0;  // file offset of the address
  uint64_t dev = 0, ino = 0;
};

Mapped mapped(const void* address) {
  const auto a = reinterpret_cast<uint64_t>(address);
  for (const MapEntry& e : read_maps_file("/proc/self/maps"))
    if (e.contains(a)) return {e.path, a - e.start + e.offset, e.kernel_dev(), e.ino};
  ADD_FAILURE() << "no mapping holds " << address;
  return {};
}

// The GNU build id of the loaded object holding `address`, read from its
// PT_NOTE segments in memory (independently of the code under test).
std::vector<uint8_t> loaded_build_id(const void* address) {
  struct Search {
    uint64_t address;
    std::vector<uint8_t> id;
  } search{reinterpret_cast<uint64_t>(address), {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        bool holds = false;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& p = info->dlpi_phdr[i];
          holds |= p.p_type == PT_LOAD && s->address - (info->dlpi_addr + p.p_vaddr) < p.p_memsz;
        }
        if (!holds) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& p = info->dlpi_phdr[i];
          if (p.p_type != PT_NOTE) continue;
          const auto* at = reinterpret_cast<const uint8_t*>(info->dlpi_addr + p.p_vaddr);
          for (size_t o = 0; o + sizeof(Elf64_Nhdr) <= p.p_memsz;) {
            Elf64_Nhdr note;
            std::memcpy(&note, at + o, sizeof note);
            const size_t name_at = o + sizeof note, desc_at = name_at + ((note.n_namesz + 3) & ~3u);
            if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(at + name_at, "GNU", 4) == 0) {
              s->id.assign(at + desc_at, at + desc_at + note.n_descsz);
              return 1;
            }
            o = desc_at + ((note.n_descsz + 3) & ~3u);
          }
        }
        return 1;
      },
      &search);
  return search.id;
}

std::string hex(const std::vector<uint8_t>& bytes) {
  std::string out;
  char two[3];
  for (uint8_t b : bytes) {
    std::snprintf(two, sizeof two, "%02x", b);
    out += two;
  }
  return out;
}

// Frames as comparable lines: "function @ basename:line" and " (inlined)".
std::vector<std::string> describe(const std::vector<SourceFrame>& frames) {
  std::vector<std::string> out;
  for (const auto& f : frames)
    out.push_back(f.function + " @ " + fs::path(f.file).filename().string() + ":" + std::to_string(f.line) +
                  (f.inlined ? " (inlined)" : ""));
  return out;
}

std::string at(const std::string& function, const char* source, const char* marker, bool inlined = false) {
  return function + " @ " + fs::path(source).filename().string() + ":" +
         std::to_string(marker_line(source, marker)) + (inlined ? " (inlined)" : "");
}

// The return address of `slot` minus 1 (the call), as a file offset.
uint64_t call_offset(int slot) {
  void* ra = fx_return_addresses[slot];
  EXPECT_NE(ra, nullptr) << "slot " << slot;
  return mapped(static_cast<char*>(ra) - 1).offset;
}

class Symbolizing : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fx_run_all();
    fxexe::caller(1);
  }

  static ModuleRef fixture() {
    const Mapped m = mapped(reinterpret_cast<void*>(&fx_c_entry));
    EXPECT_EQ(fs::path(m.path).filename(), FX_LIB_NAME);
    return {m.path, loaded_build_id(reinterpret_cast<void*>(&fx_c_entry)), 0, 0, nullptr};
  }

  // Every slot of the library, with full DWARF.
  static std::vector<std::pair<int, std::vector<std::string>>> expected_with_dwarf() {
    return {
        {FX_SLOT_INLINE,
         {at("inline_inner", FX_SOURCE_C, "inline_inner", true), at("inline_middle", FX_SOURCE_C, "inline_middle", true),
          at("fx_inline_outer", FX_SOURCE_C, "inline_outer")}},
        {FX_SLOT_SCALE_INT, {at("int fx::scale<int>(int, int)", FX_SOURCE_CPP, "scale")}},
        {FX_SLOT_SCALE_DOUBLE, {at("double fx::scale<double>(double, int)", FX_SOURCE_CPP, "scale")}},
        {FX_SLOT_OVERLOAD_INT, {at("fx::overload(int)", FX_SOURCE_CPP, "overload_int")}},
        {FX_SLOT_OVERLOAD_DOUBLE, {at("fx::overload(double, char const*)", FX_SOURCE_CPP, "overload_double")}},
        {FX_SLOT_C_ENTRY, {at("fx_c_entry", FX_SOURCE_CPP, "c_entry")}},
        {FX_SLOT_INLINE_TEMPLATE,
         {at("fx::call_with<fx_inline_template_entry(int)::<lambda()> >", FX_SOURCE_CPP, "call_with", true),
          at("fx_inline_template_entry", FX_SOURCE_CPP, "call_with_entry")}},
        {FX_SLOT_ASM_LABEL, {at("fx label <\"quoted\">", FX_SOURCE_CPP, "asm_label")}},
    };
  }

  static void expect_dwarf_frames(Symbolizer& s, Symbolizer::ModuleId id) {
    for (const auto& [slot, expected] : expected_with_dwarf())
      EXPECT_EQ(describe(s.symbolize(id, call_offset(slot))), expected) << "slot " << slot;
  }
};

TEST_F(Symbolizing, InlineLevelsTemplatesOverloadsFromDwarf) {
  Symbolizer s;
  const auto id = s.add_module(fixture());
  expect_dwarf_frames(s, id);
  EXPECT_EQ(s.located(id).path, fixture().path);
  EXPECT_EQ(s.located(id).debug_path, "");
  EXPECT_EQ(s.located(id).problem, "");
  EXPECT_TRUE(s.warnings().empty()) << s.warnings()[0];
  // Columns come with the lines (GCC emits them).
  EXPECT_GT(s.symbolize(id, call_offset(FX_SLOT_C_ENTRY))[0].column, 0u);
}

TEST_F(Symbolizing, FunctionOfTheExecutable) {
  const Mapped m = mapped(reinterpret_cast<char*>(fx_return_addresses[FX_SLOT_EXE]) - 1);
  Symbolizer s;
  const auto id = s.add_module({m.path, {}, m.dev, m.ino, nullptr});
  EXPECT_EQ(describe(s.symbolize(id, m.offset)),
            std::vector<std::string>{at("fxexe::caller(int)", __FILE__, "exe_caller")});
  EXPECT_EQ(s.located(id).problem, "");
}

TEST_F(Symbolizing, CachedPerAddress) {
  Symbolizer s;
  const auto id = s.add_module(fixture());
  const auto offset = call_offset(FX_SLOT_INLINE);
  const auto& first = s.symbolize(id, offset);
  EXPECT_EQ(&s.symbolize(id, offset), &first);
  EXPECT_EQ(first.size(), 3u);
  // Outside every PT_LOAD, an unknown module: nothing, no crash.
  EXPECT_TRUE(s.symbolize(id, uint64_t{1} << 40).empty());
  EXPECT_TRUE(s.symbolize(id + 100, offset).empty());
}

TEST_F(Symbolizing, SameIdentitySameModule) {
  Symbolizer s;
  ModuleRef a = fixture();
  ModuleRef renamed = a;
  renamed.path = "/elsewhere/lib.so";
  EXPECT_EQ(s.add_module(a), s.add_module(renamed));  // same build id
  ModuleRef by_inode{"/x/lib.so", {}, 1, 2, nullptr};
  ModuleRef other_inode{"/x/lib.so", {}, 1, 3, nullptr};
  const auto x = s.add_module(by_inode);
  EXPECT_EQ(s.add_module(by_inode), x);
  EXPECT_NE(s.add_module(other_inode), x);
  EXPECT_NE(x, s.add_module(a));
}

TEST_F(Symbolizing, SeparateDebugFileByBuildId) {
  Symbolizer s({.sysroot = "", .debug_dirs = {"/nonexistent", kTree + "/debug"}});
  ModuleRef stripped = fixture();
  stripped.path = kStripped;
  const auto id = s.add_module(stripped);
  const std::string id_hex = hex(stripped.build_id);
  EXPECT_EQ(s.located(id).path, kStripped);
  EXPECT_EQ(s.located(id).debug_path,
            kTree + "/debug/.build-id/" + id_hex.substr(0, 2) + "/" + id_hex.substr(2) + ".debug");
  EXPECT_EQ(s.located(id).problem, "");
  expect_dwarf_frames(s, id);
  EXPECT_TRUE(s.warnings().empty()) << s.warnings()[0];
}

TEST_F(Symbolizing, SeparateDebugFileByDebugLink) {
  Symbolizer s({.sysroot = "", .debug_dirs = {kTree + "/link"}});
  ModuleRef stripped = fixture();
  stripped.path = kStripped;
  const auto id = s.add_module(stripped);
  EXPECT_EQ(s.located(id).debug_path, kTree + "/link/" + fs::path(FX_LIB_NAME).stem().string() + ".debug");
  EXPECT_EQ(s.located(id).problem, "");
  expect_dwarf_frames(s, id);
}

// The recorded path under the sysroot, and the debug link in
// <debug dir>/<recorded dir>/.
TEST_F(Symbolizing, SysrootAndDebugLinkUnderTheRecordedDirectory) {
  TempDir root, debug;
  const std::string stem = fs::path(FX_LIB_NAME).stem().string();
  fs::create_directories(root.path() + "/opt/app");
  fs::create_directories(debug.path() + "/opt/app");
  fs::copy_file(kStripped, root.path() + "/opt/app/" + FX_LIB_NAME);
  fs::copy_file(kTree + "/link/" + stem + ".debug", debug.path() + "/opt/app/" + stem + ".debug");
  Symbolizer s({.sysroot = root.path(), .debug_dirs = {debug.path()}});
  ModuleRef recorded = fixture();
  recorded.path = std::string("/opt/app/") + FX_LIB_NAME;
  const auto id = s.add_module(recorded);
  EXPECT_EQ(s.located(id).path, root.path() + recorded.path);
  EXPECT_EQ(s.located(id).debug_path, debug.path() + "/opt/app/" + stem + ".debug");
  expect_dwarf_frames(s, id);
}

TEST_F(Symbolizing, DebugLinkWithWrongCrcRefused) {
  TempDir dir;
  const std::string stem = fs::path(FX_LIB_NAME).stem().string();
  const std::string fake = dir.file(stem + ".debug");
  fs::copy_file(kTree + "/link/" + stem + ".debug", fake);
  std::ofstream(fake, std::ios::app) << "x";  // same DWARF, another CRC
  Symbolizer s({.sysroot = "", .debug_dirs = {dir.path()}});
  ModuleRef stripped = fixture();
  stripped.path = kStripped;
  const auto id = s.add_module(stripped);
  EXPECT_EQ(s.located(id).debug_path, "");
  EXPECT_NE(s.located(id).problem.find(fake + ": CRC "), std::string::npos) << s.located(id).problem;
  EXPECT_EQ(describe(s.symbolize(id, call_offset(FX_SLOT_C_ENTRY))), std::vector<std::string>{"fx_c_entry @ :0"});
}

TEST_F(Symbolizing, StrippedWithoutDebugInfoNamesFromDynsym) {
  Symbolizer s;
  ModuleRef stripped = fixture();
  stripped.path = kStripped;
  const auto id = s.add_module(stripped);
  EXPECT_EQ(s.located(id).path, kStripped);
  EXPECT_EQ(s.located(id).debug_path, "");
  EXPECT_NE(s.located(id).problem.find("no debug info"), std::string::npos) << s.located(id).problem;
  const std::vector<std::pair<int, std::string>> expected = {
      {FX_SLOT_INLINE, "fx_inline_outer @ :0"},  // the static inline helpers have no symbol
      {FX_SLOT_SCALE_INT, "int fx::scale<int>(int, int) @ :0"},
      {FX_SLOT_SCALE_DOUBLE, "double fx::scale<double>(double, int) @ :0"},
      {FX_SLOT_OVERLOAD_INT, "fx::overload(int) @ :0"},
      {FX_SLOT_OVERLOAD_DOUBLE, "fx::overload(double, char const*) @ :0"},
      {FX_SLOT_C_ENTRY, "fx_c_entry @ :0"},
      {FX_SLOT_ASM_LABEL, "fx label <\"quoted\"> @ :0"},
  };
  for (const auto& [slot, frame] : expected)
    EXPECT_EQ(describe(s.symbolize(id, call_offset(slot))), std::vector<std::string>{frame}) << "slot " << slot;
  ASSERT_EQ(s.warnings().size(), 1u);
  EXPECT_NE(s.warnings()[0].find("function names only"), std::string::npos) << s.warnings()[0];
}

TEST_F(Symbolizing, BuildIdMismatchRefused) {
  ModuleRef wrong = fixture();
  const std::string actual = hex(wrong.build_id);
  ASSERT_FALSE(actual.empty());
  wrong.build_id = std::vector<uint8_t>(20, 0xab);
  Symbolizer s;
  const auto id = s.add_module(wrong);
  EXPECT_EQ(s.located(id).path, "");
  const std::string& problem = s.located(id).problem;
  EXPECT_NE(problem.find(wrong.path), std::string::npos) << problem;
  EXPECT_NE(problem.find("recorded " + hex(wrong.build_id) + ", file has " + actual), std::string::npos) << problem;
  EXPECT_NE(problem.find(actual), std::string::npos) << problem;
  EXPECT_TRUE(s.symbolize(id, call_offset(FX_SLOT_C_ENTRY)).empty());
  ASSERT_EQ(s.warnings().size(), 1u);
  EXPECT_NE(s.warnings()[0].find("not symbolized"), std::string::npos) << s.warnings()[0];
}

TEST_F(Symbolizing, DeviceAndInodeChecked) {
  const Mapped m = mapped(reinterpret_cast<void*>(&fx_c_entry));
  Symbolizer s;
  const auto same = s.add_module({m.path, {}, m.dev, m.ino, nullptr});
  EXPECT_EQ(s.located(same).problem, "");
  const auto other = s.add_module({m.path, {}, m.dev, m.ino + 1, nullptr});
  // Used (the path is all there is) but said.
  EXPECT_EQ(s.located(other).path, m.path);
  EXPECT_NE(s.located(other).problem.find("device/inode differ"), std::string::npos) << s.located(other).problem;
  EXPECT_EQ(describe(s.symbolize(other, call_offset(FX_SLOT_C_ENTRY))), expected_with_dwarf()[5].second);
  ASSERT_EQ(s.warnings().size(), 1u);
}

TEST_F(Symbolizing, EmbeddedSymbolsWhenTheFileIsMissing) {
  ModuleInfo info;
  info.load_segments = {{0, 0, 0x800, 0x800, PF_R}, {0x1000, 0x1000, 0x1000, 0x1000, PF_R | PF_X}};
  info.symbols = {{0x1100, 0x40, "_ZN2fx8overloadEi"}, {0x1200, 0x10, "plain_c"}};
  Symbolizer s;
  const auto id = s.add_module({"/nonexistent/libgone.so", {1, 2, 3}, 0, 0, &info});
  EXPECT_EQ(describe(s.symbolize(id, 0x1110)), std::vector<std::string>{"fx::overload(int) @ :0"});
  EXPECT_EQ(describe(s.symbolize(id, 0x120f)), std::vector<std::string>{"plain_c @ :0"});
  EXPECT_TRUE(s.symbolize(id, 0x1150).empty());  // between symbols
  EXPECT_TRUE(s.symbolize(id, 0x5000).empty());  // outside the segments
  EXPECT_EQ(s.located(id).path, "");
  ASSERT_EQ(s.warnings().size(), 1u);
  EXPECT_NE(s.warnings()[0].find("embedded"), std::string::npos) << s.warnings()[0];
}

// A module opened ahead on the Symbolizer's thread gives what opening it at
// first use gives.
TEST_F(Symbolizing, OpenedAheadSymbolizesTheSame) {
  Symbolizer s;
  s.open_ahead(fixture());
  s.open_ahead({"/nonexistent/libnever_used.so", {}, 0, 0, nullptr});  // asked for, never symbolized
  const auto id = s.add_module(fixture());
  expect_dwarf_frames(s, id);
  EXPECT_EQ(s.located(id).path, fixture().path);
  EXPECT_TRUE(s.warnings().empty()) << s.warnings()[0];
}

// A file missing when opened ahead, whose embedded record came after (the
// recorder writes Module records last): its symbols are the record's.
TEST_F(Symbolizing, OpenedAheadButMissingUsesTheEmbeddedRecordThatCameSince) {
  ModuleInfo info;
  info.load_segments = {{0x1000, 0x1000, 0x1000, 0x1000, PF_R | PF_X}};
  info.symbols = {{0x1200, 0x10, "plain_c"}};
  ModuleRef ref{"/nonexistent/libgone.so", {1, 2, 3}, 0, 0, nullptr};
  Symbolizer s;
  s.open_ahead(ref);
  ref.embedded = &info;
  const auto id = s.add_module(ref);
  EXPECT_EQ(describe(s.symbolize(id, 0x1208)), std::vector<std::string>{"plain_c @ :0"});
  ASSERT_EQ(s.warnings().size(), 1u);
  EXPECT_NE(s.warnings()[0].find("embedded"), std::string::npos) << s.warnings()[0];
}

// Destroyed with modules still queued: the thread stops, nothing leaks.
TEST_F(Symbolizing, DestroyedWhileOpeningAhead) {
  Symbolizer s;
  for (int i = 0; i < 50; ++i) s.open_ahead(fixture());
}

TEST_F(Symbolizing, MissingFilesAndDirectoriesAreWarnings) {
  TempDir dir;
  Symbolizer s;
  const auto missing = s.add_module({dir.file("absent.so"), {}, 0, 0, nullptr});
  const auto directory = s.add_module({dir.path(), {}, 0, 0, nullptr});
  const auto unnamed = s.add_module({"", {}, 0, 0, nullptr});
  for (auto id : {missing, directory, unnamed}) {
    EXPECT_TRUE(s.symbolize(id, 0x1000).empty());
    EXPECT_EQ(s.located(id).path, "");
    EXPECT_FALSE(s.located(id).problem.empty());
  }
  EXPECT_NE(s.located(directory).problem.find("not a regular file"), std::string::npos);
  EXPECT_EQ(s.warnings().size(), 3u);
}

// Copies of the fixture cut at various sizes: each is refused or read as
// far as it goes, with a warning.
TEST_F(Symbolizing, TruncatedFilesWarnNotCrash) {
  TempDir dir;
  const uint64_t size = fs::file_size(fixture().path);
  std::ifstream in(fixture().path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes.size(), size);
  for (uint64_t cut : {uint64_t{0}, uint64_t{1}, uint64_t{63}, uint64_t{64}, uint64_t{1000}, uint64_t{4096},
                       size / 4, size / 2, size * 3 / 4, size - 1}) {
    const std::string path = dir.file("cut-" + std::to_string(cut) + ".so");
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(cut));
    Symbolizer s;
    const auto id = s.add_module({path, {}, 0, 0, nullptr});
    for (int slot = 0; slot < FX_SLOT_EXE; ++slot) s.symbolize(id, call_offset(slot));
    EXPECT_EQ(s.warnings().size(), 1u) << "cut at " << cut;
  }
}

// Section headers and debug sections of a copy, for damaging it.
struct SectionAt {
  uint64_t header = 0;  // file offset of the section header
  uint64_t offset = 0, size = 0;
};

std::map<std::string, SectionAt> sections_of(const std::string& path) {
  std::map<std::string, SectionAt> out;
  elf_version(EV_CURRENT);
  int fd = open(path.c_str(), O_RDONLY);
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  GElf_Ehdr ehdr;
  size_t names = 0;
  if (elf && gelf_getehdr(elf, &ehdr) && elf_getshdrstrndx(elf, &names) == 0)
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr h;
      gelf_getshdr(scn, &h);
      out[elf_strptr(elf, names, h.sh_name)] = {ehdr.e_shoff + elf_ndxscn(scn) * ehdr.e_shentsize, h.sh_offset,
                                                h.sh_size};
    }
  elf_end(elf);
  close(fd);
  return out;
}

TEST_F(Symbolizing, SectionPastTheEndOfTheFileIsNotRead) {
  TempDir dir;
  const std::string path = dir.file(FX_LIB_NAME);
  fs::copy_file(fixture().path, path);
  const auto sections = sections_of(path);
  ASSERT_TRUE(sections.count(".debug_info"));
  // sh_size of .debug_info (offset 32 in an Elf64_Shdr): far past the end.
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  const uint64_t huge = uint64_t{1} << 40;
  f.seekp(static_cast<std::streamoff>(sections.at(".debug_info").header + 32));
  f.write(reinterpret_cast<const char*>(&huge), sizeof huge);
  f.close();
  Symbolizer s;
  const auto id = s.add_module({path, {}, 0, 0, nullptr});
  // Names still come from .symtab.
  EXPECT_EQ(describe(s.symbolize(id, call_offset(FX_SLOT_C_ENTRY))), std::vector<std::string>{"fx_c_entry @ :0"});
  ASSERT_EQ(s.warnings().size(), 1u);
  EXPECT_NE(s.warnings()[0].find(".debug_info extends past the end"), std::string::npos) << s.warnings()[0];
}

// Garbage in the DWARF sections (bad offsets, references, forms): whatever
// libdw makes of it, no crash and no hang.
TEST_F(Symbolizing, CorruptDwarfDoesNotCrash) {
  TempDir dir;
  std::ifstream in(fixture().path, std::ios::binary);
  const std::string original((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto sections = sections_of(fixture().path);
  int damaged = 0;
  for (const char* name : {".debug_info", ".debug_abbrev", ".debug_line", ".debug_rnglists", ".debug_str",
                           ".debug_line_str", ".debug_loclists"}) {
    auto it = sections.find(name);
    if (it == sections.end()) continue;
    ++damaged;
    for (unsigned stride : {1u, 3u, 7u, 31u}) {
      std::string bytes = original;
      for (uint64_t o = 0; o < it->second.size; o += stride) bytes[it->second.offset + o] ^= static_cast<char>(0x5a + o);
      const std::string path = dir.file(std::string("damaged") + name + std::to_string(stride) + ".so");
      std::ofstream(path, std::ios::binary) << bytes;
      Symbolizer s;
      const auto id = s.add_module({path, {}, 0, 0, nullptr});
      for (int slot = 0; slot < FX_SLOT_EXE; ++slot) s.symbolize(id, call_offset(slot));
      // Function names from .symtab survive any DWARF damage.
      EXPECT_FALSE(s.symbolize(id, call_offset(FX_SLOT_C_ENTRY)).empty()) << name << " stride " << stride;
    }
  }
  EXPECT_GE(damaged, 4);
}

}  // namespace
}  // namespace memtrack
