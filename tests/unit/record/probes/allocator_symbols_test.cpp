// Allocator entry points found in real Debian libraries and executables.
#include "record/probes/allocator_symbols.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include "record/probes/probe_placement.h"
#include "support/build_file.h"
#include "wire/allocators.h"
#include "wire/events.h"

namespace memtrack {
namespace {

constexpr const char* kLibc = "/lib/x86_64-linux-gnu/libc.so.6";
constexpr const char* kLibstdcxx = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";
constexpr unsigned N = MT_ARG_NONE;

// Expected cookies, written out independently of the catalogue:
// MT_COOKIE(kind, size_arg, count_arg, ptr_arg, out_arg).
const uint64_t kMalloc0 = MT_COOKIE(MT_MALLOC, 0, N, N, N);
const uint64_t kFree0 = MT_COOKIE(MT_FREE, N, N, 0, N);
const uint64_t kCalloc = MT_COOKIE(MT_CALLOC, 1, 0, N, N);           // (count, size)
const uint64_t kRealloc = MT_COOKIE(MT_REALLOC, 1, N, 0, N);         // (ptr, size)
const uint64_t kReallocArray = MT_COOKIE(MT_REALLOC, 2, 1, 0, N);    // (ptr, count, size)
const uint64_t kAlignSize = MT_COOKIE(MT_ALIGNED_ALLOC, 1, N, N, N); // (alignment, size)
const uint64_t kSizeAlign = MT_COOKIE(MT_ALIGNED_ALLOC, 0, N, N, N); // (size[, alignment])
const uint64_t kPosixMemalign = MT_COOKIE(MT_ALIGNED_ALLOC, 2, N, N, 0);

const std::map<std::string, uint64_t> kCxxOperators = {
    {"_Znwm", kMalloc0},
    {"_Znam", kMalloc0},
    {"_ZnwmRKSt9nothrow_t", kMalloc0},
    {"_ZnamRKSt9nothrow_t", kMalloc0},
    {"_ZnwmSt11align_val_t", kSizeAlign},
    {"_ZnamSt11align_val_t", kSizeAlign},
    {"_ZnwmSt11align_val_tRKSt9nothrow_t", kSizeAlign},
    {"_ZnamSt11align_val_tRKSt9nothrow_t", kSizeAlign},
    {"_ZdlPv", kFree0},
    {"_ZdaPv", kFree0},
    {"_ZdlPvm", kFree0},
    {"_ZdaPvm", kFree0},
    {"_ZdlPvSt11align_val_t", kFree0},
    {"_ZdaPvSt11align_val_t", kFree0},
    {"_ZdlPvmSt11align_val_t", kFree0},
    {"_ZdaPvmSt11align_val_t", kFree0},
    {"_ZdlPvRKSt9nothrow_t", kFree0},
    {"_ZdaPvRKSt9nothrow_t", kFree0},
    {"_ZdlPvSt11align_val_tRKSt9nothrow_t", kFree0},
    {"_ZdaPvSt11align_val_tRKSt9nothrow_t", kFree0},
};

// Every name (preferred or alias) to its site.
std::map<std::string, ProbeSite> by_name(const std::vector<ProbeSite>& sites) {
  std::map<std::string, ProbeSite> out;
  for (const ProbeSite& s : sites) {
    out.emplace(s.symbol, s);
    for (const std::string& alias : s.aliases) out.emplace(alias, s);
  }
  return out;
}

void expect_sites(const std::vector<ProbeSite>& sites, const std::map<std::string, uint64_t>& expected) {
  auto names = by_name(sites);
  for (const auto& [name, cookie] : expected) {
    auto it = names.find(name);
    ASSERT_NE(it, names.end()) << name;
    EXPECT_EQ(it->second.cookie, cookie) << name;
  }
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The invariants every site must satisfy, checked by decoding the file bytes
// from the entry to the probe: each skipped instruction is transparent, the
// probed one is what the placement says, and the cookie fits the BPF side
// (arguments 0..4) and needs_return.
void check_sites(const std::string& path, const std::vector<ProbeSite>& sites) {
  std::vector<uint8_t> file = read_file(path);
  ASSERT_FALSE(file.empty()) << path;
  InstructionDecoder decoder;
  std::set<uint64_t> entries;
  for (const ProbeSite& s : sites) {
    SCOPED_TRACE(path + " " + s.symbol + " " + s.placement);
    EXPECT_TRUE(entries.insert(s.symbol_offset).second) << "two sites at one address";
    EXPECT_EQ(s.needs_return, MT_COOKIE_KIND(s.cookie) != MT_FREE && MT_COOKIE_KIND(s.cookie) != MT_UNWIND);
    ArgumentMask read = 0;
    for (unsigned arg : {MT_COOKIE_SIZE_ARG(s.cookie), MT_COOKIE_COUNT_ARG(s.cookie),
                         MT_COOKIE_PTR_ARG(s.cookie), MT_COOKIE_OUT_ARG(s.cookie)}) {
      if (arg == MT_ARG_NONE) continue;
      EXPECT_LE(arg, 4u);  // alloc.bpf.c reads PARM1..PARM5
      read |= static_cast<ArgumentMask>(1u << arg);
    }
    if (MT_COOKIE_KIND(s.cookie) != MT_UNWIND) {
      EXPECT_NE(read, 0);
    }
    ASSERT_GE(s.probe_offset, s.symbol_offset);
    ASSERT_LE(s.probe_offset - s.symbol_offset, 32u);
    ASSERT_LT(s.probe_offset, file.size());
    std::span<const uint8_t> code(file.data() + s.symbol_offset, file.size() - s.symbol_offset);
    uint64_t at = 0;
    while (at < s.probe_offset - s.symbol_offset) {
      auto insn = decoder.decode(code, at, read);
      ASSERT_TRUE(insn.has_value());
      EXPECT_TRUE(insn->transparent) << "skipped " << insn->mnemonic;
      at += insn->length;
    }
    ASSERT_EQ(at, s.probe_offset - s.symbol_offset) << "probe not on an instruction boundary";
    auto probed = decoder.decode(code, at);
    ASSERT_TRUE(probed.has_value());
    if (s.placement.find("(emulated)") != std::string::npos) {
      EXPECT_FALSE(probed->emulated.empty());
    } else {
      EXPECT_EQ(s.probe_offset, s.symbol_offset);
      EXPECT_TRUE(probed->emulated.empty());
    }
  }
}

// The PT_LOAD segment holding a loaded address, from the program headers the
// dynamic linker used: its header and where it starts in this process.
struct LoadedSegment {
  ElfW(Phdr) header;
  uintptr_t start;
};

LoadedSegment loaded_segment(const void* address) {
  struct Query {
    uintptr_t address;
    std::optional<LoadedSegment> found;
  } q{reinterpret_cast<uintptr_t>(address), std::nullopt};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* q = static_cast<Query*>(data);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          uintptr_t start = info->dlpi_addr + ph.p_vaddr;
          if (ph.p_type == PT_LOAD && q->address >= start && q->address < start + ph.p_memsz) {
            q->found = LoadedSegment{ph, start};
            return 1;
          }
        }
        return 0;
      },
      &q);
  if (!q.found) throw std::runtime_error("address not in a loaded object");
  return *q.found;
}

// File offset of a loaded function: an oracle independent of the
// section-based lookup.
uint64_t loaded_file_offset(const void* function) {
  LoadedSegment segment = loaded_segment(function);
  return reinterpret_cast<uintptr_t>(function) - segment.start + segment.header.p_offset;
}

class TempFile {
 public:
  explicit TempFile(const std::vector<uint8_t>& contents) {
    char name[] = "/tmp/probe_sites_test.XXXXXX";
    int fd = mkstemp(name);
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    path_ = name;
    bool ok = ::write(fd, contents.data(), contents.size()) == static_cast<ssize_t>(contents.size());
    ::close(fd);
    if (!ok) throw std::runtime_error("write failed");
  }
  ~TempFile() { ::unlink(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void expect_error_naming(const std::string& path, const char* reason) {
  try {
    find_probe_sites(path);
    ADD_FAILURE() << "no exception for " << path;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
}

TEST(AllocatorCatalogue, NamesAndRanks) {
  ASSERT_NE(find_allocator_function("malloc"), nullptr);
  EXPECT_EQ(find_allocator_function("cfree@GLIBC_2.2.5"), find_allocator_function("cfree"));
  EXPECT_LT(find_allocator_function("free")->rank, find_allocator_function("cfree")->rank);
  EXPECT_LT(find_allocator_function("free")->rank, find_allocator_function("_ZdlPv")->rank);
  EXPECT_LT(find_allocator_function("_ZdlPv")->rank, find_allocator_function("tc_delete")->rank);
  EXPECT_LT(find_allocator_function("malloc")->rank, find_allocator_function("__libc_malloc")->rank);
  // Not allocation entry points, or not describable by a cookie.
  for (const char* name : {"xallocx", "je_xallocx", "mi_expand", "mi_strdup", "mi_heap_malloc",
                           "mi_reallocarr", "reallocarr", "_aligned_malloc", "je_malloc_default",
                           "malloc_usable_size", "nallocx", "strdup"}) {
    EXPECT_EQ(find_allocator_function(name), nullptr) << name;
  }
}

TEST(AllocatorCatalogue, Cookies) {
  const std::map<std::string, uint64_t> expected = {
      {"reallocarray", kReallocArray},
      {"free_sized", kFree0},
      {"free_aligned_sized", kFree0},
      {"pvalloc", kSizeAlign},
      {"je_posix_memalign", kPosixMemalign},
      {"je_mallocx", kMalloc0},
      {"_rjem_mallocx", kMalloc0},
      {"_rjem_rallocx", kRealloc},
      {"_rjem_sdallocx", kFree0},
      {"_rjem_calloc", kCalloc},
      {"mi_zalloc", MT_COOKIE(MT_CALLOC, 0, N, N, N)},  // (size): no count
      {"mi_mallocn", MT_COOKIE(MT_MALLOC, 1, 0, N, N)},
      {"mi_new_n", MT_COOKIE(MT_MALLOC, 1, 0, N, N)},
      {"mi_calloc_aligned", MT_COOKIE(MT_ALIGNED_ALLOC, 1, 0, N, N)},
      {"mi_malloc_aligned", kSizeAlign},
      {"mi_aligned_alloc", kAlignSize},
      {"mi_reallocn", kReallocArray},
      {"mi_recalloc_aligned", kReallocArray},
      {"mi_new_reallocn", kReallocArray},
      {"mi_free_size_aligned", kFree0},
      {"tc_posix_memalign", kPosixMemalign},
      {"tc_memalign", kAlignSize},
      {"tc_new_aligned_nothrow", kSizeAlign},
      {"tc_deletearray_sized_aligned", kFree0},
      {"__posix_memalign", kPosixMemalign},
  };
  for (const auto& [name, cookie] : expected) {
    const AllocatorFunction* f = find_allocator_function(name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(f->cookie, cookie) << name;
  }
}

TEST(ProbeSites, Libc) {
  std::vector<ProbeSite> sites = find_probe_sites(kLibc);
  check_sites(kLibc, sites);
  const std::map<std::string, uint64_t> expected = {
      {"malloc", kMalloc0},        {"calloc", kCalloc},
      {"realloc", kRealloc},       {"reallocarray", kReallocArray},
      {"free", kFree0},            {"cfree", kFree0},
      {"aligned_alloc", kAlignSize}, {"memalign", kAlignSize},
      {"posix_memalign", kPosixMemalign}, {"valloc", kSizeAlign},
      {"pvalloc", kSizeAlign},
  };
  expect_sites(sites, expected);
  auto names = by_name(sites);

  // Addresses agree with where the dynamic linker put the functions.
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(libc, nullptr);
  for (const auto& [name, cookie] : expected) {
    void* fn = name == "cfree" ? dlvsym(libc, "cfree", "GLIBC_2.2.5") : dlsym(libc, name.c_str());
    ASSERT_NE(fn, nullptr) << name;
    EXPECT_EQ(names.at(name).symbol_offset, loaded_file_offset(fn)) << name;
  }
  // free_sized is C23, glibc 2.43: present exactly when libc exports it.
  for (const char* name : {"free_sized", "free_aligned_sized"})
    EXPECT_EQ(names.count(name) == 1, dlsym(libc, name) != nullptr) << name;
  dlclose(libc);

  // glibc exports cfree and __libc_free at free's address: one site, named free.
  EXPECT_EQ(names.at("cfree").symbol, "free");
  EXPECT_EQ(names.at("__libc_free").symbol, "free");

  // free starts with test %rdi,%rdi (single-stepped) then je (emulated).
  std::vector<uint8_t> file = read_file(kLibc);
  const ProbeSite& free_site = names.at("free");
  const uint8_t* entry = file.data() + free_site.symbol_offset;
  bool test_then_je = entry[0] == 0x48 && entry[1] == 0x85 && entry[2] == 0xff &&
                      (entry[3] == 0x74 || (entry[3] == 0x0f && entry[4] == 0x84));
  ASSERT_TRUE(test_then_je) << "this libc's free does not start with test;je";
  EXPECT_EQ(free_site.probe_offset, free_site.symbol_offset + 3);
  EXPECT_EQ(free_site.placement, "+3: jcc after test (emulated)");
}

// glibc's shared free, alone, carries what lets its probe tell libc's own
// direct calls (an exiting thread's tcache) from the program's frees: where
// its entry is from the probe, and libc's code around it, within the pages of
// the code segment the dynamic linker mapped. Where the program's own frees
// are direct calls too (glibc linked in statically) and in other allocators,
// nothing.
TEST(ProbeSites, OnlyGlibcsSharedFreeTellsLibcsOwnCalls) {
  auto names = by_name(find_probe_sites(kLibc));
  for (const auto& [name, site] : names)
    EXPECT_EQ(site.runtime_free_bits != 0, site.symbol == "free") << name;
  const ProbeSite& free_site = names.at("free");
  const uint64_t bits = free_site.runtime_free_bits;
  EXPECT_EQ(bits & MT_COOKIE_RUNTIME_FREE, MT_COOKIE_RUNTIME_FREE);
  EXPECT_EQ(MT_COOKIE_PROBE_DELTA(bits), free_site.probe_offset - free_site.symbol_offset);
  EXPECT_EQ(bits & (MT_COOKIE_RUNTIME_FREE - 1), 0u) << "argument layout bits set";

  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(libc, nullptr);
  const uintptr_t entry = reinterpret_cast<uintptr_t>(dlsym(libc, "free"));
  dlclose(libc);
  const LoadedSegment segment = loaded_segment(reinterpret_cast<const void*>(entry));
  ASSERT_TRUE(segment.header.p_flags & PF_X);
  const uintptr_t page = 4096, entry_page = entry / page;
  const uintptr_t code_start = (entry_page - MT_COOKIE_CODE_PAGES_BELOW(bits)) * page;
  const uintptr_t code_end = (entry_page + MT_COOKIE_CODE_PAGES_FROM(bits)) * page;
  EXPECT_GE(code_start, segment.start / page * page);
  EXPECT_LE(code_end, (segment.start + segment.header.p_memsz + page - 1) / page * page);
  EXPECT_LT(code_start, entry);
  EXPECT_GT(code_end, entry);

  for (const std::string& path : {std::string(PROBE_SITES_LIBC_STATIC), std::string(PROBE_SITES_JEMALLOC)}) {
    auto sites = by_name(find_probe_sites(path));
    ASSERT_EQ(sites.count("free"), 1u) << path;
    for (const auto& [name, site] : sites) EXPECT_EQ(site.runtime_free_bits, 0u) << path << " " << name;
  }
}

// libstdc++'s operators get their memory from an external malloc, which is
// probed: its new/delete are not (no return probe where no allocator lives).
// The operators are there to be found, though. Where an exception begins is
// probed at entry.
TEST(ProbeSites, LibstdcxxOperatorsWrapMallocAndAreNotProbed) {
  void* lib = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr);
  for (const auto& [name, cookie] : kCxxOperators) EXPECT_NE(dlsym(lib, name.c_str()), nullptr) << name;
  dlclose(lib);
  std::vector<ProbeSite> sites = find_probe_sites(kLibstdcxx);
  check_sites(kLibstdcxx, sites);
  ASSERT_EQ(sites.size(), 1u);
  EXPECT_EQ(sites[0].symbol, "__cxa_allocate_exception");
  EXPECT_EQ(MT_COOKIE_KIND(sites[0].cookie), MT_UNWIND);
}

// The unwinder's entry points are probed at entry only: an exception thrown
// inside a probed operator new (bad_alloc) gets the call's return address
// back before it unwinds (alloc.bpf.c, on_unwind).
TEST(ProbeSites, UnwinderEntriesAreProbedAtEntryOnly) {
  const std::string libgcc = "/lib/x86_64-linux-gnu/libgcc_s.so.1";
  std::vector<ProbeSite> sites = find_probe_sites(libgcc);
  check_sites(libgcc, sites);
  std::set<std::string> names;
  for (const ProbeSite& s : sites) {
    names.insert(s.symbol);
    EXPECT_EQ(MT_COOKIE_KIND(s.cookie), MT_UNWIND) << s.symbol;
    EXPECT_FALSE(s.needs_return) << s.symbol;
  }
  EXPECT_EQ(names, (std::set<std::string>{"_Unwind_RaiseException", "_Unwind_Resume_or_Rethrow",
                                          "_Unwind_ForcedUnwind"}));
}

std::map<std::string, uint64_t> jemalloc_expected() {
  std::map<std::string, uint64_t> expected = kCxxOperators;
  expected.insert({{"malloc", kMalloc0},
                   {"calloc", kCalloc},
                   {"realloc", kRealloc},
                   {"free", kFree0},
                   {"aligned_alloc", kAlignSize},
                   {"memalign", kAlignSize},
                   {"posix_memalign", kPosixMemalign},
                   {"valloc", kSizeAlign},
                   {"mallocx", kMalloc0},
                   {"rallocx", kRealloc},
                   {"dallocx", kFree0},
                   {"sdallocx", kFree0}});
  return expected;
}

TEST(ProbeSites, JemallocShared) {
  std::vector<ProbeSite> sites = find_probe_sites(PROBE_SITES_JEMALLOC);
  check_sites(PROBE_SITES_JEMALLOC, sites);
  expect_sites(sites, jemalloc_expected());
  EXPECT_EQ(by_name(sites).count("xallocx"), 0u);
}

TEST(ProbeSites, JemallocLinkedStatically) {
  std::vector<ProbeSite> sites = find_probe_sites(PROBE_SITES_JEMALLOC_FIXTURE);
  check_sites(PROBE_SITES_JEMALLOC_FIXTURE, sites);
  expect_sites(sites, jemalloc_expected());
}

TEST(ProbeSites, Mimalloc) {
  std::vector<ProbeSite> sites = find_probe_sites(PROBE_SITES_MIMALLOC);
  check_sites(PROBE_SITES_MIMALLOC, sites);
  expect_sites(sites, {
                          {"mi_malloc", kMalloc0},
                          {"mi_calloc", kCalloc},
                          {"mi_zalloc", MT_COOKIE(MT_CALLOC, 0, N, N, N)},
                          {"mi_realloc", kRealloc},
                          {"mi_reallocf", kRealloc},
                          {"mi_reallocn", kReallocArray},
                          {"mi_free", kFree0},
                          {"mi_free_size", kFree0},
                          {"mi_malloc_aligned", kSizeAlign},
                          {"mi_calloc_aligned", MT_COOKIE(MT_ALIGNED_ALLOC, 1, 0, N, N)},
                          {"mi_posix_memalign", kPosixMemalign},
                          {"mi_new", kMalloc0},
                          {"mi_new_aligned_nothrow", kSizeAlign},
                          {"mi_new_n", MT_COOKIE(MT_MALLOC, 1, 0, N, N)},
                          {"malloc", kMalloc0},
                          {"_Znwm", kMalloc0},
                          {"__libc_memalign", kAlignSize},
                      });
  auto names = by_name(sites);
  // malloc, mi_malloc, __libc_malloc share one address; the C name wins.
  EXPECT_EQ(names.at("mi_malloc").symbol, "malloc");
  EXPECT_EQ(names.at("mi_malloc").symbol_offset, names.at("__libc_malloc").symbol_offset);
  for (const char* absent : {"mi_strdup", "mi_heap_malloc", "_aligned_malloc", "mi_expand"})
    EXPECT_EQ(names.count(absent), 0u) << absent;
}

TEST(ProbeSites, Tcmalloc) {
  std::vector<ProbeSite> sites = find_probe_sites(PROBE_SITES_TCMALLOC);
  check_sites(PROBE_SITES_TCMALLOC, sites);
  expect_sites(sites, {
                          {"tc_malloc", kMalloc0},
                          {"tc_malloc_skip_new_handler", kMalloc0},
                          {"tc_calloc", kCalloc},
                          {"tc_realloc", kRealloc},
                          {"tc_free", kFree0},
                          {"tc_free_sized", kFree0},
                          {"tc_memalign", kAlignSize},
                          {"tc_posix_memalign", kPosixMemalign},
                          {"tc_valloc", kSizeAlign},
                          {"tc_pvalloc", kSizeAlign},
                          {"tc_new_nothrow", kMalloc0},
                          {"tc_newarray_aligned", kSizeAlign},
                          {"tc_deletearray_aligned_nothrow", kFree0},
                      });
  // tcmalloc aliases free, cfree, operator delete and the tc_ names.
  auto names = by_name(sites);
  const ProbeSite& free_site = names.at("free");
  EXPECT_EQ(free_site.symbol, "free");
  for (const char* alias : {"cfree", "_ZdlPv", "_ZdaPv", "tc_free", "tc_delete", "tc_cfree"})
    EXPECT_EQ(names.at(alias).symbol_offset, free_site.symbol_offset) << alias;
  EXPECT_EQ(names.count("tc_nallocx"), 0u);
}

TEST(ProbeSites, FilesWithoutAllocatorsGiveNothing) {
  EXPECT_TRUE(find_probe_sites("/bin/true").empty());
  EXPECT_TRUE(find_probe_sites("/lib/x86_64-linux-gnu/libm.so.6").empty());
}

TEST(ProbeSites, UnusableFilesThrowNamingTheFile) {
  expect_error_naming("/nonexistent/libfoo.so", "No such file");

  TempFile text({'h', 'e', 'l', 'l', 'o', '\n'});
  expect_error_naming(text.path(), "not an ELF file");

  std::vector<uint8_t> libc = read_file(kLibc);
  ASSERT_GT(libc.size(), 200u);
  TempFile truncated(std::vector<uint8_t>(libc.begin(), libc.begin() + 200));
  expect_error_naming(truncated.path(), "truncated");

  // Cut inside .text: the section headers are gone too.
  TempFile half(std::vector<uint8_t>(libc.begin(), libc.begin() + libc.size() / 2));
  expect_error_naming(half.path(), "truncated");

  std::vector<uint8_t> relocatable = libc;
  relocatable[16] = ET_REL;  // e_type, little-endian
  relocatable[17] = 0;
  TempFile object(relocatable);
  expect_error_naming(object.path(), "not an executable or shared object");
}

}  // namespace
}  // namespace memtrack

namespace memtrack {
namespace {

// The names the fast path's interposer defines (wire/allocators.h).
std::map<std::string, uint64_t> interposed_names() {
  std::map<std::string, uint64_t> names;
#define MT_NAME(name, cookie) names.emplace(#name, cookie);
  MT_INTERPOSED_LIBC(MT_NAME)
  MT_INTERPOSED_OTHERS(MT_NAME)
#undef MT_NAME
  return names;
}

// Every probe site of glibc and of the shared jemalloc, mimalloc and tcmalloc
// has all its names interposed (the attacher leaves it to the interposer
// then, and whichever name a call uses reaches a wrapper), each with the
// site's cookie: the record is the one its probe would make.
TEST(InterposedNames, EverySiteOfTheSharedAllocatorsIsTaken) {
  const auto names = interposed_names();
  for (const char* path : {kLibc, PROBE_SITES_JEMALLOC, PROBE_SITES_MIMALLOC, PROBE_SITES_TCMALLOC}) {
    SCOPED_TRACE(path);
    auto sites = find_probe_sites(path);
    EXPECT_GT(sites.size(), 5u);
    for (const ProbeSite& site : sites) {
      std::vector<std::string> all = site.aliases;
      all.push_back(site.symbol);
      for (const std::string& name : all) {
        auto it = names.find(name);
        ASSERT_NE(it, names.end()) << name << " (at " << site.symbol << ") is not interposed";
        EXPECT_EQ(it->second, site.cookie) << name << " at " << site.symbol;
      }
    }
  }
}

}  // namespace
}  // namespace memtrack
