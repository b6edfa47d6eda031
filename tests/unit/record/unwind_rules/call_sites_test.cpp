// return_address_offsets: every return address a disassembly finds, on real
// files, and few others.
#include "record/unwind_rules/call_sites.h"

#include <capstone/capstone.h>
#include <gelf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "module/elf_file.h"

namespace memtrack {
namespace {

// The reference: a linear sweep with capstone (what the recorder did before),
// keeping the calls whose target it can check (a direct call into an
// executable segment, or any indirect call).
std::vector<uint64_t> disassembled_return_addresses(const std::string& path) {
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
  std::vector<uint64_t> offsets;
  for (const GElf_Phdr& s : segments) {
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
  return offsets;
}

class CallSitesOf : public testing::TestWithParam<std::string> {};

TEST_P(CallSitesOf, EveryCallOfTheDisassemblyAndFewOthers) {
  const std::string path = GetParam();
  auto started = std::chrono::steady_clock::now();
  std::vector<uint64_t> scanned = return_address_offsets(path);
  auto scan_time = std::chrono::steady_clock::now() - started;
  std::vector<uint64_t> reference = disassembled_return_addresses(path);
  ASSERT_GT(reference.size(), 1000u) << path;
  ASSERT_TRUE(std::is_sorted(scanned.begin(), scanned.end()));
  std::vector<uint64_t> missed;
  std::set_difference(reference.begin(), reference.end(), scanned.begin(), scanned.end(),
                      std::back_inserter(missed));
  EXPECT_TRUE(missed.empty()) << path << ": " << missed.size() << " of " << reference.size()
                              << " return addresses missed, the first at file offset 0x" << std::hex
                              << missed.front();
  // Extra offsets cost rules nobody looks up: a few percent.
  EXPECT_LT(scanned.size(), reference.size() * 13 / 10) << path;
  std::printf("%s: %zu calls disassembled, %zu offsets scanned in %.1f ms\n", path.c_str(), reference.size(),
              scanned.size(), std::chrono::duration<double, std::milli>(scan_time).count());
}

INSTANTIATE_TEST_SUITE_P(Debian, CallSitesOf,
                         testing::Values("/usr/lib/x86_64-linux-gnu/libc.so.6",
                                         "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
                                         "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0", "/usr/bin/python3"));

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
