// return_address_offsets: every return address a disassembly finds, on real
// files, and few others.
#include "record/unwind_rules/call_sites.h"

#include <capstone/capstone.h>
#include <dlfcn.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "module/elf_file.h"

namespace memtrack {
namespace {

struct Disassembly {
  std::vector<uint64_t> return_offsets;
  uint64_t code_bytes = 0;  // of the executable segments
};

// The reference: a linear sweep with capstone (what the recorder did before),
// keeping the calls whose target it can check (a direct call into an
// executable segment, or any indirect call).
Disassembly disassembled_return_addresses(const std::string& path) {
  ElfFile file(path);
  size_t count = 0;
  elf_getphdrnum(file.elf(), &count);
  std::vector<uint8_t> image;  // not libelf's mapping: other tests' probes show there
  file.read_bytes(0, file.file_size(), image);
  std::vector<GElf_Phdr> segments;
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr phdr;
    if (gelf_getphdr(file.elf(), static_cast<int>(i), &phdr) && phdr.p_type == PT_LOAD && (phdr.p_flags & PF_X))
      segments.push_back(phdr);
  }
  csh handle;
  if (cs_open(CS_ARCH_X86, CS_MODE_64, &handle) != CS_ERR_OK) throw std::runtime_error("capstone unavailable");
  cs_option(handle, CS_OPT_DETAIL, CS_OPT_ON);
  cs_insn* insn = cs_malloc(handle);
  Disassembly result;
  std::vector<uint64_t>& offsets = result.return_offsets;
  for (const GElf_Phdr& s : segments) {
    result.code_bytes += s.p_filesz;
    const uint8_t* code = image.data() + s.p_offset;
    size_t left = s.p_filesz;
    uint64_t address = s.p_vaddr;
    while (left > 0) {
      if (!cs_disasm_iter(handle, &code, &left, &address, insn)) {
        ++code, --left, ++address;
        continue;
      }
      if (insn->id != X86_INS_CALL) continue;
      const cs_x86_op& target = insn->detail->x86.operands[0];
      bool checkable = target.type != X86_OP_IMM ||
                       std::any_of(segments.begin(), segments.end(), [&](const GElf_Phdr& e) {
                         return uint64_t(target.imm) >= e.p_vaddr && uint64_t(target.imm) - e.p_vaddr < e.p_filesz;
                       });
      if (checkable) offsets.push_back(address - s.p_vaddr + s.p_offset);
    }
  }
  cs_free(insn, 1);
  cs_close(&handle);
  return result;
}

// The file of the object loaded in this process whose name starts with
// `soname_prefix` ("libc.so."), as the dynamic loader found it; "" if none.
std::string loaded_object(const std::string& soname_prefix) {
  struct Search {
    std::string prefix, path;
  } search{soname_prefix, ""};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        std::string name = info->dlpi_name ? info->dlpi_name : "";
        if (std::filesystem::path(name).filename().string().starts_with(s->prefix)) s->path = name;
        return s->path.empty() ? 0 : 1;
      },
      &search);
  return search.path;
}

// The file the dynamic loader loads for `soname` (its search path, ld.so.cache); "" if none.
std::string library_file(const std::string& soname) {
  void* handle = dlopen(soname.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (!handle) return "";
  link_map* map = nullptr;
  std::string path = dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map ? map->l_name : "";
  dlclose(handle);
  return path;
}

// The first executable ELF file named `name` on PATH (not a wrapper script
// such as pyenv's shims); "" if none.
std::string elf_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string file = dir + "/" + name;
    char magic[4] = {};
    if (dir.empty() || access(file.c_str(), X_OK) != 0) continue;
    if (std::ifstream(file).read(magic, sizeof(magic)) && std::string(magic, 4) == "\177ELF") return file;
  }
  return "";
}

// The files to scan, found on this system: libc and libstdc++ as this test
// loaded them, SQLite's library as the loader finds it, python3's
// interpreter on PATH.
std::string file_of(const std::string& what) {
  if (what == "libc") return loaded_object("libc.so.");
  if (what == "libstdcxx") return loaded_object("libstdc++.so.");
  if (what == "libsqlite3") return library_file("libsqlite3.so.0");
  if (what == "python3") return elf_on_path("python3");
  return "";
}

class CallSitesOf : public testing::TestWithParam<std::string> {};

TEST_P(CallSitesOf, EveryCallOfTheDisassemblyAndFewOthers) {
  const std::string path = file_of(GetParam());
  if (path.empty()) {
    std::fprintf(stderr, "\n*** SKIPPED: no %s on this system: its call sites were NOT checked ***\n",
                 GetParam().c_str());
    GTEST_SKIP() << "no " << GetParam() << " found (loaded objects, the loader's search, PATH)";
  }
  auto started = std::chrono::steady_clock::now();
  std::vector<uint64_t> scanned = return_address_offsets(path);
  auto scan_time = std::chrono::steady_clock::now() - started;
  Disassembly disassembly = disassembled_return_addresses(path);
  const std::vector<uint64_t>& reference = disassembly.return_offsets;
  // Guards against a vacuous comparison (a file the sweep finds no code in),
  // whatever the file's size: compiled code has a call every few dozen
  // bytes, far more than one per KiB.
  ASSERT_GT(reference.size(), disassembly.code_bytes / 1024) << path << ": " << disassembly.code_bytes
                                                            << " bytes of code";
  ASSERT_TRUE(std::is_sorted(scanned.begin(), scanned.end()));
  std::vector<uint64_t> missed;
  std::set_difference(reference.begin(), reference.end(), scanned.begin(), scanned.end(),
                      std::back_inserter(missed));
  EXPECT_TRUE(missed.empty()) << path << ": " << missed.size() << " of " << reference.size()
                              << " return addresses missed, the first at file offset 0x" << std::hex
                              << missed.front();
  // Extra offsets cost rules nobody looks up: a few percent.
  EXPECT_LT(scanned.size(), reference.size() * 13 / 10) << path;
  std::printf("%s: %zu calls disassembled in %lu bytes of code, %zu offsets scanned in %.1f ms\n", path.c_str(),
              reference.size(), static_cast<unsigned long>(disassembly.code_bytes), scanned.size(),
              std::chrono::duration<double, std::milli>(scan_time).count());
}

INSTANTIATE_TEST_SUITE_P(ThisSystem, CallSitesOf, testing::Values("libc", "libstdcxx", "libsqlite3", "python3"),
                         [](const testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(CallSites, UnreadableFileIsAnErrorNamingIt) {
  try {
    return_address_offsets("/nonexistent/file.so");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/file.so"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace memtrack
