// export_modules on artifacts written here: Mapping, Fork, Exec and Exit
// records of a test library (libfx_export_lib.so, built from
// fx_export_lib.c) and of libc, mapped twice, inherited, changed on disk,
// missing; the metadata and files compared with what libelf, nm, dlsym,
// /proc/self/maps and zlib say independently of src/export.
#include "export/module_export.h"

#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <zlib.h>

#include <gtest/gtest.h>

#include <sys/mman.h>

#include <filesystem>
#include <map>
#include <set>

#include "export_test_support.h"
#include "format/artifact.h"
#include "support/build_file.h"
#include "util/proc_maps.h"

namespace memtrack::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint64_t kStart = 5'000'000'000;  // the header's start_monotonic_ns
constexpr uint64_t kPageMask = ~uint64_t{0xfff};
constexpr const char* kLibc = "/lib/x86_64-linux-gnu/libc.so.6";
constexpr const char* kLibName = "libfx_export_lib.so";

Event mapping(int32_t pid, uint64_t after_start, uint64_t start, uint64_t len, uint64_t offset,
              const std::string& path, std::vector<uint8_t> build_id, uint64_t dev = 0, uint64_t ino = 0) {
  auto info = std::make_shared<MappingInfo>();
  info->len = len;
  info->file_offset = offset;
  info->dev = dev;
  info->ino = ino;
  info->build_id = std::move(build_id);
  info->prot = 5;  // PROT_READ | PROT_EXEC
  info->path = path;
  Event event;
  event.type = EventType::Mapping;
  event.pid = event.tid = pid;
  event.timestamp = kStart + after_start;
  event.addr = start;
  event.mapping = std::move(info);
  return event;
}

Event lifecycle(EventType type, int32_t pid, uint64_t after_start, int32_t parent = 0) {
  Event event;
  event.type = type;
  event.pid = event.tid = pid;
  event.timestamp = kStart + after_start;
  event.parent_pid = parent;
  return event;
}

Event exec(int32_t pid, uint64_t after_start, const std::string& path, const std::string& comm,
           const std::vector<std::string>& argv) {
  Event event = lifecycle(EventType::Exec, pid, after_start);
  event.image = std::make_shared<ProcessImage>(ProcessImage{path, comm, argv});
  return event;
}

void write_artifact(const std::string& path, const std::vector<Event>& events,
                    const std::vector<ModuleInfo>& modules = {}) {
  ArtifactHeader header;
  header.start_monotonic_ns = kStart;
  header.page_size = 4096;
  ArtifactWriter writer(path, header);
  writer.append(events);
  // As the recorder does (--embed-modules): after every event.
  for (const ModuleInfo& module : modules) writer.append_module(std::make_shared<const ModuleInfo>(module));
  writer.finish({});
}

// The Mapping of an ELF file's code when it is loaded with bias `base`, as
// the kernel maps it: whole pages.
struct CodeMapping {
  uint64_t start = 0, len = 0, offset = 0;
};

CodeMapping code_mapping(const ElfFacts& elf, uint64_t base) {
  const GElf_Phdr code = elf.code_segment();
  const uint64_t first_page = code.p_offset & kPageMask;
  const uint64_t end = (code.p_offset + code.p_filesz + 0xfff) & kPageMask;
  return {base + (code.p_vaddr & kPageMask), end - first_page, first_page};
}

json placement(const std::string& key, const CodeMapping& m, std::optional<uint64_t> bias, int64_t from, int64_t to) {
  return {{"key", key},           {"start", m.start},
          {"end", m.start + m.len}, {"file_offset", m.offset},
          {"load_bias", bias ? json(static_cast<int64_t>(*bias)) : json(nullptr)},
          {"from_ns", from},      {"to_ns", to}};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

// perf's rule, applied to nm's listing: what symbols.map must hold.
std::vector<MapLine> expected_map(std::vector<MapLine> symbols) {
  std::erase_if(symbols, [](const MapLine& s) { return s.name.empty() || s.name[0] == '$'; });
  std::sort(symbols.begin(), symbols.end(), [](const MapLine& a, const MapLine& b) {
    return std::tie(a.address, a.name, b.size) < std::tie(b.address, b.name, a.size);
  });
  symbols.erase(std::unique(symbols.begin(), symbols.end(),
                            [](const MapLine& a, const MapLine& b) { return a.address == b.address && a.name == b.name; }),
                symbols.end());
  for (MapLine& s : symbols) {
    if (s.size != 0) continue;
    uint64_t next = 0;
    for (const MapLine& other : symbols)
      if (other.address > s.address && (next == 0 || other.address < next)) next = other.address;
    s.size = next != 0 ? next - s.address : ((s.address + 4095) & kPageMask) + 4096 - s.address;
  }
  return symbols;
}

std::string map_text(const std::vector<MapLine>& lines) {
  std::string text;
  char buf[5000];
  for (const MapLine& s : lines) {
    std::snprintf(buf, sizeof(buf), "%" PRIx64 " %" PRIx64 " %s\n", s.address, s.size, s.name.c_str());
    text += buf;
  }
  return text;
}

// The test library loaded into this process: where the kernel says its code
// is (device, inode, as a Mapping record gives them) and the link-time
// address of fx_export_first (runtime address - load bias).
struct LoadedLibrary {
  void* handle = nullptr;
  std::string path;
  uint64_t dev = 0, ino = 0;
  uint64_t first = 0;
};

class ExportModules : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char resolved[PATH_MAX];
    ASSERT_NE(realpath(FX_EXPORT_LIB, resolved), nullptr);
    lib_.path = resolved;
    lib_.handle = dlopen(resolved, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_.handle, nullptr) << dlerror();
    link_map* map = nullptr;
    ASSERT_EQ(dlinfo(lib_.handle, RTLD_DI_LINKMAP, &map), 0);
    void* first = dlsym(lib_.handle, "fx_export_first");
    ASSERT_NE(first, nullptr);
    lib_.first = reinterpret_cast<uintptr_t>(first) - map->l_addr;
    for (const MapEntry& e : read_maps_file("/proc/self/maps"))
      if (e.path == lib_.path) {
        lib_.dev = e.kernel_dev();
        lib_.ino = e.ino;
      }
    ASSERT_NE(lib_.ino, 0u) << "the library is not in /proc/self/maps";
  }
  static void TearDownTestSuite() {
    if (lib_.handle) dlclose(lib_.handle);
  }

  std::string lib_key() const { return hex_bytes(lib_elf_.build_id()).substr(0, 12) + "-" + kLibName; }

  static inline LoadedLibrary lib_;
  ElfFacts lib_elf_{FX_EXPORT_LIB};
  TempDir dir_;
};

TEST_F(ExportModules, ExportsEveryFileAndEveryPlacementWithItsTimes) {
  const ElfFacts libc(kLibc);
  const std::vector<uint8_t> lib_id = lib_elf_.build_id(), libc_id = libc.build_id();
  const std::vector<uint8_t> stale_id = {0x0b, 0xad, 0x0b, 0xad, 0x0b, 0xad, 0x00, 0x01, 0x02, 0x03,
                                         0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d};
  const std::vector<uint8_t> gone_id = {0xde, 0xad, 0xbe, 0xef, 0x00, 0x11, 0x22, 0x33};
  const std::string gone = "/nonexistent/libgone.so";

  const CodeMapping lib_a = code_mapping(lib_elf_, 0x7f1000000000);
  const CodeMapping lib_b = code_mapping(lib_elf_, 0x7f2000000000);
  const CodeMapping libc_c = code_mapping(libc, 0x7f3000000000);
  // libc mapped later over the first placement of the library (ends it).
  const uint64_t libc_over_base = lib_a.start - (libc.code_segment().p_vaddr & kPageMask);
  const CodeMapping libc_over = code_mapping(libc, libc_over_base);
  const CodeMapping stale = code_mapping(lib_elf_, 0x7f4000000000);
  const CodeMapping gone_map{0x7f4000100000, 0x1000, 0};
  const CodeMapping by_inode = code_mapping(lib_elf_, 0x7f4000200000);
  const CodeMapping wrong_inode = code_mapping(lib_elf_, 0x7f4000300000);

  write_artifact(dir_.file("a.zst"),
                 {exec(100, 50, "/usr/bin/fx-app", "fx-app", {"fx-app", "--flag"}),
                  mapping(100, 100, lib_a.start, lib_a.len, lib_a.offset, lib_.path, lib_id),
                  mapping(100, 200, libc_c.start, libc_c.len, libc_c.offset, kLibc, libc_id),
                  lifecycle(EventType::Fork, 101, 300, 100),
                  mapping(100, 400, lib_b.start, lib_b.len, lib_b.offset, lib_.path, lib_id),
                  exec(101, 500, "/bin/true", "true", {"true"}),
                  mapping(101, 600, stale.start, stale.len, stale.offset, lib_.path, stale_id),
                  mapping(101, 650, gone_map.start, gone_map.len, gone_map.offset, gone, gone_id),
                  mapping(101, 700, by_inode.start, by_inode.len, by_inode.offset, lib_.path, {}, lib_.dev, lib_.ino),
                  mapping(101, 710, wrong_inode.start, wrong_inode.len, wrong_inode.offset, lib_.path, {}, lib_.dev,
                          lib_.ino + 1),
                  lifecycle(EventType::Malloc, 100, 750),  // allocations place nothing
                  mapping(100, 800, libc_over.start, libc_over.len, libc_over.offset, kLibc, libc_id),
                  lifecycle(EventType::Exit, 101, 850),
                  lifecycle(EventType::Exit, 100, 900)});

  const std::string out = dir_.file("out");
  ExportResult result = export_modules(dir_.file("a.zst"), out);

  const std::string libc_key = hex_bytes(libc_id).substr(0, 12) + "-libc.so.6";
  const std::string stale_key = std::string("0bad0bad0bad-") + kLibName;
  const std::string gone_key = "deadbeef0011-libgone.so";
  char inode_key[128], wrong_inode_key[128];
  std::snprintf(inode_key, sizeof(inode_key), "dev%" PRIx64 "-ino%" PRIu64 "-%s", lib_.dev, lib_.ino, kLibName);
  std::snprintf(wrong_inode_key, sizeof(wrong_inode_key), "dev%" PRIx64 "-ino%" PRIu64 "-%s", lib_.dev, lib_.ino + 1,
                kLibName);

  // Three files skipped, each warned about by path and reason.
  EXPECT_EQ(result.files, 6u);
  EXPECT_EQ(result.files_exported, 3u);
  EXPECT_EQ(result.processes, 2u);
  EXPECT_EQ(result.placements, 10u);
  EXPECT_FALSE(result.error);
  EXPECT_EQ(result.exit_status(), 1);
  ASSERT_EQ(result.warnings.size(), 3u);
  EXPECT_TRUE(contains(result.warnings[0], lib_.path) && contains(result.warnings[0], "build id " + hex_bytes(lib_id)) &&
              contains(result.warnings[0], hex_bytes(stale_id)))
      << result.warnings[0];
  EXPECT_TRUE(contains(result.warnings[1], gone) && contains(result.warnings[1], "No such file")) << result.warnings[1];
  EXPECT_TRUE(contains(result.warnings[2], lib_.path) && contains(result.warnings[2], "inode")) << result.warnings[2];

  const json metadata = read_json(out + "/memtrack.metadata");
  EXPECT_EQ(metadata["version"], 1);
  EXPECT_EQ(metadata["artifact"], dir_.file("a.zst"));
  EXPECT_EQ(metadata["start_monotonic_ns"], kStart);

  // Processes: every placement with its own bias and time range (ns since
  // the header's start); the child's inherited ones from the fork to its
  // exec; skipped files have no bias.
  const json expected_processes = {
      {"100",
       {{"command", {"fx-app", "--flag"}},
        {"comm", "fx-app"},
        {"parent", nullptr},
        {"execs", {{{"at_ns", 50}, {"path", "/usr/bin/fx-app"}, {"comm", "fx-app"}, {"argv", {"fx-app", "--flag"}}}}},
        {"placements",
         {placement(lib_key(), lib_a, 0x7f1000000000, 100, 800), placement(libc_key, libc_c, 0x7f3000000000, 200, 900),
          placement(lib_key(), lib_b, 0x7f2000000000, 400, 900),
          placement(libc_key, libc_over, libc_over_base, 800, 900)}}}},
      {"101",
       {{"command", {"true"}},
        {"comm", "true"},
        {"parent", 100},
        {"execs", {{{"at_ns", 500}, {"path", "/bin/true"}, {"comm", "true"}, {"argv", {"true"}}}}},
        {"placements",
         {placement(lib_key(), lib_a, 0x7f1000000000, 300, 500), placement(libc_key, libc_c, 0x7f3000000000, 300, 500),
          placement(stale_key, stale, std::nullopt, 600, 850), placement(gone_key, gone_map, std::nullopt, 650, 850),
          placement(inode_key, by_inode, 0x7f4000200000, 700, 850),
          placement(wrong_inode_key, wrong_inode, std::nullopt, 710, 850)}}}}};
  EXPECT_EQ(metadata["processes"], expected_processes) << metadata["processes"].dump(1);

  // The library: everything, compared with libelf's view of the file.
  const auto eh_frame = lib_elf_.section(".eh_frame");
  const auto eh_frame_hdr = lib_elf_.section(".eh_frame_hdr");
  ASSERT_TRUE(eh_frame && eh_frame_hdr);
  std::vector<MapLine> lib_symbols = nm_functions(lib_.path, false);
  for (const MapLine& s : nm_functions(lib_.path, true)) lib_symbols.push_back(s);
  const std::vector<MapLine> lib_map = expected_map(lib_symbols);
  const json lib_entry = {
      {"path", lib_.path},
      {"status", "exported"},
      {"reason", nullptr},
      {"identity", "build-id"},
      {"build_id", hex_bytes(lib_id)},
      {"dev", nullptr},
      {"ino", nullptr},
      {"load_segments", lib_elf_.load_segments_json()},
      {"eh_frame", {{"file", lib_key() + ".eh_frame"}, {"address", eh_frame->first}, {"size", eh_frame->second.size()}}},
      {"eh_frame_hdr",
       {{"file", lib_key() + ".eh_frame_hdr"}, {"address", eh_frame_hdr->first}, {"size", eh_frame_hdr->second.size()}}},
      {"debug_frame", nullptr},
      {"debug_link", nullptr},
      {"debug_file", nullptr},
      {"symbols_file", lib_key() + ".symbols.map"},
      {"symbols", lib_map.size()},
      {"missing", json::array()}};
  EXPECT_EQ(metadata["files"][lib_key()], lib_entry) << metadata["files"][lib_key()].dump(1);
  EXPECT_EQ(read_whole_file(out + "/" + lib_key() + ".eh_frame"), eh_frame->second);
  EXPECT_EQ(read_whole_file(out + "/" + lib_key() + ".eh_frame_hdr"), eh_frame_hdr->second);
  EXPECT_EQ(read_whole_file(out + "/" + lib_key() + ".symbols.map"), map_text(lib_map));

  // The symbols laid out in fx_export_lib.c, at the link-time address dlsym
  // gives: sizes as written, the unsized one extended to the next, the local
  // one (.symtab only) present, "$x" and the data object absent, the IFUNC
  // present.
  const std::vector<MapLine> written = read_symbols_map(out + "/" + lib_key() + ".symbols.map");
  auto line_of = [&](const std::string& name) -> std::optional<MapLine> {
    std::optional<MapLine> found;
    for (const MapLine& s : written)
      if (s.name == name) {
        EXPECT_FALSE(found) << name << " appears twice";
        found = s;
      }
    return found;
  };
  EXPECT_EQ(line_of("fx_export_first"), (MapLine{lib_.first, 0x20, "fx_export_first"}));
  EXPECT_EQ(line_of("fx_export_unsized"), (MapLine{lib_.first + 0x20, 0x10, "fx_export_unsized"}));
  EXPECT_EQ(line_of("fx_export_local"), (MapLine{lib_.first + 0x30, 8, "fx_export_local"}));
  EXPECT_EQ(line_of("$x"), std::nullopt);
  EXPECT_EQ(line_of("fx_export_data"), std::nullopt);
  EXPECT_NE(line_of("fx_export_ifunc"), std::nullopt);
  EXPECT_NE(line_of("fx_export_alloc"), std::nullopt);
  EXPECT_TRUE(std::is_sorted(written.begin(), written.end()));

  // libc: its debug link, and its separate debug file when installed (whose
  // CRC is the link's), merged into the symbols.
  const json& libc_entry = metadata["files"][libc_key];
  EXPECT_EQ(libc_entry["status"], "exported");
  EXPECT_EQ(libc_entry["path"], kLibc);
  EXPECT_EQ(libc_entry["build_id"], hex_bytes(libc_id));
  EXPECT_EQ(libc_entry["load_segments"], libc.load_segments_json());
  const auto libc_eh_frame = libc.section(".eh_frame");
  ASSERT_TRUE(libc_eh_frame);
  EXPECT_EQ(libc_entry["eh_frame"]["address"], libc_eh_frame->first);
  EXPECT_EQ(read_whole_file(out + "/" + libc_key + ".eh_frame"), libc_eh_frame->second);
  EXPECT_EQ(read_whole_file(out + "/" + libc_key + ".eh_frame_hdr"), libc.section(".eh_frame_hdr")->second);
  const auto link = libc.section(".gnu_debuglink");
  ASSERT_TRUE(link);
  const std::string link_name = link->second.c_str();
  uint32_t link_crc = 0;
  std::memcpy(&link_crc, link->second.data() + ((link_name.size() + 4) & ~size_t{3}), 4);  // little-endian host
  EXPECT_EQ(libc_entry["debug_link"], (json{{"name", link_name}, {"crc", link_crc}}));
  const std::string libc_hex = hex_bytes(libc_id);
  const std::string debug_file = "/usr/lib/debug/.build-id/" + libc_hex.substr(0, 2) + "/" + libc_hex.substr(2) + ".debug";
  const std::vector<MapLine> libc_written = read_symbols_map(out + "/" + libc_key + ".symbols.map");
  EXPECT_EQ(libc_entry["symbols"], libc_written.size());
  auto has = [](const std::vector<MapLine>& map, const MapLine& symbol) {
    return std::any_of(map.begin(), map.end(), [&](const MapLine& s) {
      return s.address == symbol.address && s.name == symbol.name && (symbol.size == 0 || s.size == symbol.size);
    });
  };
  for (const MapLine& s : nm_functions(kLibc, true)) EXPECT_TRUE(has(libc_written, s)) << s;
  if (fs::exists(debug_file)) {
    EXPECT_EQ(libc_entry["debug_file"], debug_file);
    const std::string debug_bytes = read_whole_file(debug_file);
    EXPECT_EQ(crc32(0, reinterpret_cast<const Bytef*>(debug_bytes.data()), static_cast<uInt>(debug_bytes.size())),
              link_crc);
    // Static functions exist only in the debug file's .symtab.
    size_t only_in_debug = 0;
    for (const MapLine& s : nm_functions(debug_file, false)) {
      EXPECT_TRUE(has(libc_written, s)) << s;
      only_in_debug += s.name == "_int_malloc";
    }
    EXPECT_EQ(only_in_debug, 1u);
  } else {
    std::fprintf(stderr, "note: %s is not installed: the debug-file merge is checked on the stripped test library only\n",
                 debug_file.c_str());
    EXPECT_EQ(libc_entry["debug_file"], nullptr);
  }

  // Skipped files: entries that say why and what is missing, no files.
  const json skipped_fields = {{"dev", nullptr}, {"ino", nullptr}, {"load_segments", nullptr}, {"eh_frame", nullptr},
                               {"eh_frame_hdr", nullptr}, {"debug_frame", nullptr}, {"debug_link", nullptr},
                               {"debug_file", nullptr}, {"symbols_file", nullptr}, {"symbols", 0},
                               {"missing", {"symbols", "cfi", "load_segments"}}};
  const json& stale_entry = metadata["files"][stale_key];
  EXPECT_EQ(stale_entry["status"], "changed");
  EXPECT_EQ(stale_entry["path"], lib_.path);
  EXPECT_EQ(stale_entry["build_id"], hex_bytes(stale_id));
  EXPECT_TRUE(contains(stale_entry["reason"], hex_bytes(lib_id)));
  const json& gone_entry = metadata["files"][gone_key];
  EXPECT_EQ(gone_entry["status"], "missing");
  EXPECT_EQ(gone_entry["path"], gone);
  for (const json* entry : {&stale_entry, &gone_entry})
    for (const auto& [field, value] : skipped_fields.items()) EXPECT_EQ((*entry)[field], value) << field;

  // By device and inode: checked against the file's mapping, exported with
  // the build id read from it; another inode at the path is not the file.
  const json& inode_entry = metadata["files"][inode_key];
  EXPECT_EQ(inode_entry["status"], "exported");
  EXPECT_EQ(inode_entry["identity"], "dev-ino");
  EXPECT_EQ(inode_entry["dev"], lib_.dev);
  EXPECT_EQ(inode_entry["ino"], lib_.ino);
  EXPECT_EQ(inode_entry["build_id"], hex_bytes(lib_id));
  EXPECT_EQ(read_whole_file(out + "/" + std::string(inode_key) + ".symbols.map"), map_text(lib_map));
  const json& wrong_entry = metadata["files"][wrong_inode_key];
  EXPECT_EQ(wrong_entry["status"], "changed");
  EXPECT_EQ(wrong_entry["ino"], lib_.ino + 1);
  EXPECT_EQ(wrong_entry["build_id"], nullptr);

  EXPECT_EQ(metadata["files"].size(), 6u);
  std::set<std::string> expected_files = {"memtrack.metadata"};
  for (const std::string& key : {lib_key(), libc_key, std::string(inode_key)})
    for (const char* suffix : {".symbols.map", ".eh_frame", ".eh_frame_hdr"}) expected_files.insert(key + suffix);
  EXPECT_EQ(files_in(out), expected_files);
}

// A stripped copy (only .dynsym left) gets its local functions back from the
// separate debug file found by build id: the same symbols.map as the
// unstripped library. Without the debug file, they are missing.
TEST_F(ExportModules, StrippedLibraryTakesItsSymbolsFromItsDebugFile) {
  const std::vector<uint8_t> id = lib_elf_.build_id();
  const std::string hex = hex_bytes(id);
  const std::string debug_dir = dir_.file("debug/.build-id/" + hex.substr(0, 2));
  fs::create_directories(debug_dir);
  const std::string debug_file = debug_dir + "/" + hex.substr(2) + ".debug";
  const std::string stripped = dir_.file(kLibName);
  for (const auto& argv : std::vector<std::vector<std::string>>{
           {OBJCOPY_TOOL, "--only-keep-debug", lib_.path, debug_file}, {OBJCOPY_TOOL, "--strip-all", lib_.path, stripped}}) {
    RunResult run = run_process(argv, std::chrono::seconds(30));
    ASSERT_EQ(run.exit_code(), 0) << run.describe();
  }
  ASSERT_TRUE(nm_functions(stripped, false).empty()) << "objcopy --strip-all left a .symtab";

  const CodeMapping code = code_mapping(lib_elf_, 0x7f1000000000);
  write_artifact(dir_.file("a.zst"), {mapping(7, 10, code.start, code.len, code.offset, stripped, id)});

  ExportResult with_debug = export_modules(dir_.file("a.zst"), dir_.file("with"), {.debug_dirs = {dir_.file("debug")}});
  EXPECT_EQ(with_debug.exit_status(), 0);
  const json entry = read_json(dir_.file("with/memtrack.metadata"))["files"][lib_key()];
  EXPECT_EQ(entry["debug_file"], debug_file);
  std::vector<MapLine> symbols = nm_functions(lib_.path, false);
  for (const MapLine& s : nm_functions(lib_.path, true)) symbols.push_back(s);
  EXPECT_EQ(read_whole_file(dir_.file("with/" + lib_key() + ".symbols.map")), map_text(expected_map(symbols)));

  ExportResult without = export_modules(dir_.file("a.zst"), dir_.file("without"), {.debug_dirs = {dir_.file("none")}});
  EXPECT_EQ(without.exit_status(), 0);
  EXPECT_EQ(read_json(dir_.file("without/memtrack.metadata"))["files"][lib_key()]["debug_file"], nullptr);
  EXPECT_EQ(read_whole_file(dir_.file("without/" + lib_key() + ".symbols.map")),
            map_text(expected_map(nm_functions(lib_.path, true))));
}

// A file that is not ELF is skipped with a warning; an ELF file without
// symbols or CFI is exported with what it has, saying what is missing.
TEST_F(ExportModules, UnreadableAndBareFilesSayWhatIsMissing) {
  const std::string not_elf = dir_.file("libtext.so");
  std::ofstream(not_elf) << "not an ELF file\n";
  const std::string bare = dir_.file("libbare.so");
  RunResult run = run_process({OBJCOPY_TOOL, "--strip-all", "-R", ".dynsym", "-R", ".eh_frame", "-R", ".eh_frame_hdr",
                               lib_.path, bare},
                              std::chrono::seconds(30));
  ASSERT_EQ(run.exit_code(), 0) << run.describe();
  const std::vector<uint8_t> id = lib_elf_.build_id();
  write_artifact(dir_.file("a.zst"), {mapping(7, 10, 0x7f0000000000, 0x1000, 0, not_elf, {0x01, 0x02, 0x03}),
                                      mapping(7, 20, 0x7f1000000000, 0x1000, 0, bare, id)});

  ExportResult result = export_modules(dir_.file("a.zst"), dir_.file("out"));
  EXPECT_EQ(result.exit_status(), 1);
  ASSERT_EQ(result.warnings.size(), 1u);
  EXPECT_TRUE(contains(result.warnings[0], not_elf) && contains(result.warnings[0], "not an ELF file"))
      << result.warnings[0];
  const json files = read_json(dir_.file("out/memtrack.metadata"))["files"];
  EXPECT_EQ(files["010203-libtext.so"]["status"], "unreadable");
  const json& bare_entry = files[hex_bytes(id).substr(0, 12) + "-libbare.so"];
  EXPECT_EQ(bare_entry["status"], "exported");
  EXPECT_EQ(bare_entry["missing"], (json{"symbols", "cfi"}));
  EXPECT_EQ(bare_entry["symbols_file"], nullptr);
  EXPECT_EQ(bare_entry["eh_frame"], nullptr);
  EXPECT_EQ(bare_entry["debug_frame"], nullptr);
  EXPECT_EQ(bare_entry["load_segments"], ElfFacts(bare).load_segments_json());  // objcopy moved them
  EXPECT_EQ(files_in(dir_.file("out")), std::set<std::string>{"memtrack.metadata"});
}

// No .eh_frame (fx_export_debug_frame is built without unwind tables):
// the CFI comes from .debug_frame, decompressed.
TEST_F(ExportModules, DebugFrameWhenThereIsNoEhFrame) {
  const ElfFacts elf(FX_EXPORT_DEBUG_FRAME);
  const std::vector<uint8_t> id = elf.build_id();
  const CodeMapping code = code_mapping(elf, 0x7f1000000000);
  write_artifact(dir_.file("a.zst"), {mapping(7, 10, code.start, code.len, code.offset, FX_EXPORT_DEBUG_FRAME, id)});
  const std::string decompressed = dir_.file("decompressed.so");
  RunResult run = run_process({OBJCOPY_TOOL, "--decompress-debug-sections", FX_EXPORT_DEBUG_FRAME, decompressed},
                              std::chrono::seconds(30));
  ASSERT_EQ(run.exit_code(), 0) << run.describe();
  const auto debug_frame = ElfFacts(decompressed).section(".debug_frame");
  ASSERT_TRUE(debug_frame);

  ExportResult result = export_modules(dir_.file("a.zst"), dir_.file("out"));
  EXPECT_EQ(result.exit_status(), 0);
  const std::string key = hex_bytes(id).substr(0, 12) + "-libfx_export_debug_frame.so";
  const json entry = read_json(dir_.file("out/memtrack.metadata"))["files"][key];
  EXPECT_EQ(entry["eh_frame"], nullptr);
  EXPECT_EQ(entry["eh_frame_hdr"], nullptr);
  EXPECT_EQ(entry["debug_frame"],
            (json{{"file", key + ".debug_frame"}, {"address", debug_frame->first}, {"size", debug_frame->second.size()}}));
  EXPECT_EQ(entry["missing"], json::array());
  EXPECT_EQ(read_whole_file(dir_.file("out/" + key + ".debug_frame")), debug_frame->second);
}

// " (deleted)": the file was replaced while mapped. The file now at the path
// is used when it is the same build, and only then.
TEST_F(ExportModules, DeletedPathIsReadOnlyWhenTheSameBuildIsThere) {
  const std::vector<uint8_t> id = lib_elf_.build_id();
  const CodeMapping code = code_mapping(lib_elf_, 0x7f1000000000);
  const std::string deleted = lib_.path + " (deleted)";
  write_artifact(dir_.file("a.zst"), {mapping(7, 10, code.start, code.len, code.offset, deleted, id),
                                      mapping(7, 20, 0x7f2000000000, 0x1000, 0, deleted, {0xee, 0xee})});
  ExportResult result = export_modules(dir_.file("a.zst"), dir_.file("out"));
  ASSERT_EQ(result.warnings.size(), 1u);
  EXPECT_TRUE(contains(result.warnings[0], lib_.path) && contains(result.warnings[0], "deleted while mapped") &&
              contains(result.warnings[0], "eeee"))
      << result.warnings[0];
  const json files = read_json(dir_.file("out/memtrack.metadata"))["files"];
  EXPECT_EQ(files[lib_key()]["status"], "exported");
  EXPECT_EQ(files[lib_key()]["path"], lib_.path);
  EXPECT_EQ(files[std::string("eeee-") + kLibName]["status"], "changed");
}

TEST_F(ExportModules, KeysStayUniqueWhenBuildIdPrefixAndNameAgree) {
  std::vector<uint8_t> one(20, 0xaa), two(20, 0xaa);
  two.back() = 0xbb;
  write_artifact(dir_.file("a.zst"), {mapping(7, 10, 0x7f0000000000, 0x1000, 0, "/nonexistent/a/libsame.so", one),
                                      mapping(7, 20, 0x7f1000000000, 0x1000, 0, "/nonexistent/b/libsame.so", two)});
  export_modules(dir_.file("a.zst"), dir_.file("out"));
  const json metadata = read_json(dir_.file("out/memtrack.metadata"));
  EXPECT_EQ(metadata["files"]["aaaaaaaaaaaa-libsame.so"]["path"], "/nonexistent/a/libsame.so");
  EXPECT_EQ(metadata["files"]["aaaaaaaaaaaa-libsame.so-2"]["path"], "/nonexistent/b/libsame.so");
  EXPECT_EQ(metadata["processes"]["7"]["placements"][1]["key"], "aaaaaaaaaaaa-libsame.so-2");
}

// Exit status: 0 when everything was exported; 2 when the artifact has a
// corrupt frame (what was read before it is still written).
TEST_F(ExportModules, ExitStatusIsZeroWhenCleanAndTwoOnACorruptArtifact) {
  const CodeMapping code = code_mapping(lib_elf_, 0x7f1000000000);
  write_artifact(dir_.file("a.zst"), {mapping(7, 10, code.start, code.len, code.offset, lib_.path, lib_elf_.build_id())});
  ExportResult clean = export_modules(dir_.file("a.zst"), dir_.file("clean"));
  EXPECT_EQ(clean.exit_status(), 0);
  EXPECT_TRUE(clean.warnings.empty());
  EXPECT_EQ(clean.files_exported, 1u);

  // Flip a byte inside the event frame, which follows the header frame
  // (8-byte envelope + payload) and its 24-byte frame marker: its checksum
  // no longer matches.
  std::string bytes = read_whole_file(dir_.file("a.zst"));
  uint32_t header_payload = 0;
  std::memcpy(&header_payload, bytes.data() + 4, 4);
  bytes[8 + header_payload + 24 + 20] ^= 0x5a;
  std::ofstream(dir_.file("bad.zst"), std::ios::binary) << bytes;
  ExportResult corrupt = export_modules(dir_.file("bad.zst"), dir_.file("bad"));
  EXPECT_TRUE(corrupt.error);
  EXPECT_EQ(corrupt.exit_status(), 1);
  EXPECT_TRUE(fs::exists(dir_.file("bad/memtrack.metadata")));
}

TEST_F(ExportModules, ThrowsWhenTheDirectoryCannotBeCreated) {
  write_artifact(dir_.file("a.zst"), {});
  std::ofstream(dir_.file("plain")) << "a file, not a directory\n";
  EXPECT_THROW(export_modules(dir_.file("a.zst"), dir_.file("plain/out")), std::runtime_error);
  EXPECT_THROW(export_modules(dir_.file("missing.zst"), dir_.file("out")), std::runtime_error);
}

// The device and inode a mapping of `path` shows in /proc/self/maps: what a
// Mapping record identifies a file by.
std::pair<uint64_t, uint64_t> mapped_dev_ino(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  void* at = mmap(nullptr, 1, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (at == MAP_FAILED) throw std::runtime_error("cannot map " + path);
  std::pair<uint64_t, uint64_t> found{0, 0};
  for (const MapEntry& e : read_maps_file("/proc/self/maps"))
    if (e.start == reinterpret_cast<uintptr_t>(at)) found = {e.kernel_dev(), e.ino};
  munmap(at, 1);
  return found;
}

// Every file of `dir` with its bytes.
std::map<std::string, std::string> dir_contents(const std::string& dir) {
  std::map<std::string, std::string> contents;
  for (const std::string& name : files_in(dir)) contents[name] = read_whole_file(dir + "/" + name);
  return contents;
}

// record --embed-modules: with Module records in the artifact, export-modules
// writes the same bytes as from the files on disk, after the files are gone
// (deleted; replaced by another file), so it can run on another machine.
// One file is identified by build id (.eh_frame), one by device and inode
// (.debug_frame); libc, not embedded, is still read from disk.
TEST_F(ExportModules, EmbeddedModulesStandInForFilesGoneFromDisk) {
  fs::create_directories(dir_.file("lib"));
  const std::string lib = dir_.file("lib/") + kLibName;
  const std::string other = dir_.file("lib/libfx_export_debug_frame.so");
  fs::copy_file(lib_.path, lib);
  fs::copy_file(FX_EXPORT_DEBUG_FRAME, other);
  const ElfFacts other_elf(other);
  const ElfFacts libc_elf(kLibc);
  const auto [other_dev, other_ino] = mapped_dev_ino(other);
  ASSERT_NE(other_ino, 0u);
  const CodeMapping lib_code = code_mapping(lib_elf_, 0x7f1000000000);
  const CodeMapping other_code = code_mapping(other_elf, 0x7f2000000000);
  const CodeMapping libc_code = code_mapping(libc_elf, 0x7f3000000000);
  const std::vector<Event> events = {
      mapping(7, 10, lib_code.start, lib_code.len, lib_code.offset, lib, lib_elf_.build_id()),
      mapping(7, 20, other_code.start, other_code.len, other_code.offset, other, {}, other_dev, other_ino),
      mapping(7, 30, libc_code.start, libc_code.len, libc_code.offset, kLibc, libc_elf.build_id())};

  const std::string artifact = dir_.file("a.zst");  // one name: the metadata quotes it
  write_artifact(artifact, events);
  ExportResult from_disk = export_modules(artifact, dir_.file("from-disk"));
  ASSERT_EQ(from_disk.exit_status(), 0) << from_disk.warnings.front();

  std::vector<ModuleInfo> modules;
  for (const Event& event : {events[0], events[1]}) {
    LocatedModule located = locate_module(identity_of(*event.mapping), {event.mapping->path});
    ASSERT_TRUE(located.module) << located.reason;
    modules.push_back(std::move(*located.module));
  }
  EXPECT_EQ(identity_of(modules[1]), (ModuleIdentity{{}, other_dev, other_ino}));
  write_artifact(artifact, events, modules);

  fs::remove(lib);
  fs::copy_file(lib_.path, other + ".new");
  fs::rename(other + ".new", other);  // another file, another inode, at the path
  ExportResult embedded = export_modules(artifact, dir_.file("embedded"));
  EXPECT_EQ(embedded.exit_status(), 0) << embedded.warnings.front();
  EXPECT_EQ(embedded.files_exported, 3u);
  const auto expected = dir_contents(dir_.file("from-disk"));
  // metadata; symbols, eh_frame and eh_frame_hdr of lib and libc; symbols and debug_frame of other
  EXPECT_EQ(expected.size(), 9u);
  EXPECT_EQ(dir_contents(dir_.file("embedded")), expected);

  // The control: without the Module records, both files are now skipped.
  write_artifact(artifact, events);
  ExportResult without = export_modules(artifact, dir_.file("without"));
  EXPECT_EQ(without.files_exported, 1u);
  ASSERT_EQ(without.warnings.size(), 2u);
  EXPECT_TRUE(contains(without.warnings[0], "cannot open")) << without.warnings[0];
  EXPECT_TRUE(contains(without.warnings[1], "another file is there now")) << without.warnings[1];
}

}  // namespace
}  // namespace memtrack::testing
