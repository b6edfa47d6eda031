// What a rule miss costs user space: ModuleCfi::rule_at_return_address on
// this process's libc.so.6, at 4096 distinct offsets spread over its code
// (each looked up once per pass; ModuleCfi keeps no rule cache).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "unwind/cfi_rules.h"

namespace {

struct LibcCode {
  std::string path;
  std::vector<uint64_t> offsets;  // file offsets in its executable mapping
};

// libc's executable mapping, from /proc/self/maps (the one holding malloc).
const LibcCode& libc_code() {
  static const LibcCode code = [] {
    const auto malloc_address = reinterpret_cast<uint64_t>(&malloc);
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
      std::istringstream fields(line);
      std::string range, perms, device, path;
      uint64_t offset = 0, inode = 0;
      fields >> range >> perms >> std::hex >> offset >> device >> std::dec >> inode >> path;
      const uint64_t start = std::stoull(range.substr(0, range.find('-')), nullptr, 16);
      const uint64_t end = std::stoull(range.substr(range.find('-') + 1), nullptr, 16);
      if (malloc_address < start || malloc_address >= end) continue;
      LibcCode found{path, {}};
      constexpr uint64_t kCount = 4096;
      // An odd stride: the offsets do not all fall on aligned function starts.
      const uint64_t stride = (end - start) / kCount | 1;
      for (uint64_t i = 0; i < kCount; ++i) found.offsets.push_back(offset + i * stride);
      return found;
    }
    throw std::runtime_error("libc's code is not in /proc/self/maps");
  }();
  return code;
}

// Returns how many offsets have a rule (supported or not).
int64_t lookup_all(const memtrack::ModuleCfi& cfi, const std::vector<uint64_t>& offsets) {
  int64_t found = 0;
  for (uint64_t offset : offsets) found += cfi.rule_at_return_address(offset).has_value();
  return found;
}

// Opening the file: ELF header, program headers, .eh_frame(_hdr), the
// attempt at .debug_frame.
void BM_OpenLibc(benchmark::State& state) {
  for (auto _ : state) {
    memtrack::ModuleCfi cfi(libc_code().path);
    benchmark::DoNotOptimize(&cfi);
  }
}
BENCHMARK(BM_OpenLibc);

// The first misses in a module: a fresh ModuleCfi per pass, so libdw parses
// every FDE (and CIE) for the first time.
void BM_LookupsColdModule(benchmark::State& state) {
  const LibcCode& code = libc_code();
  for (auto _ : state) {
    state.PauseTiming();
    auto cfi = std::make_unique<memtrack::ModuleCfi>(code.path);
    state.ResumeTiming();
    benchmark::DoNotOptimize(lookup_all(*cfi, code.offsets));
    state.PauseTiming();
    cfi.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(code.offsets.size()));
}
BENCHMARK(BM_LookupsColdModule);

// Later misses: libdw has the FDEs interned and only runs each FDE's CFA
// program up to the address.
void BM_LookupsWarmModule(benchmark::State& state) {
  const LibcCode& code = libc_code();
  memtrack::ModuleCfi cfi(code.path);
  const int64_t found = lookup_all(cfi, code.offsets);
  for (auto _ : state) benchmark::DoNotOptimize(lookup_all(cfi, code.offsets));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(code.offsets.size()));
  // The share of offsets with CFI: the figures are for real lookups.
  state.counters["with_cfi"] = static_cast<double>(found) / static_cast<double>(code.offsets.size());
}
BENCHMARK(BM_LookupsWarmModule);

}  // namespace
