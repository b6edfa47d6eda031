// Symbolization (src/symbolize): distinct addresses symbolized per second,
// cold (first lookup of each address: symbol table, CU, line table, scopes)
// and cached (the per-address cache a report hits for every repeated frame),
// and the one-time cost of opening a module.
//
// The subject is libc.so.6 (with its separate debug file when libc6-dbg is
// installed), or the ELF file named by $SYMBOLIZE_BENCH_FILE (e.g. a
// RelWithDebInfo memtrack binary: large C++ units with many inline levels).
#include <benchmark/benchmark.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "symbolize/symbolizer.h"

namespace {

struct Subject {
  std::string path;
  std::vector<uint64_t> offsets;  // distinct file offsets spread over the code
  std::string error;
};

// The file's executable PT_LOAD, read from its headers (x86-64 ELF).
bool code_segment(const std::string& path, uint64_t& offset, uint64_t& size) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  Elf64_Ehdr ehdr;
  bool found = false;
  if (pread(fd, &ehdr, sizeof ehdr, 0) == sizeof ehdr && std::memcmp(ehdr.e_ident, ELFMAG, SELFMAG) == 0 &&
      ehdr.e_ident[EI_CLASS] == ELFCLASS64)
    for (int i = 0; i < ehdr.e_phnum && !found; ++i) {
      Elf64_Phdr p;
      if (pread(fd, &p, sizeof p, static_cast<off_t>(ehdr.e_phoff + i * sizeof p)) != sizeof p) break;
      if (p.p_type == PT_LOAD && (p.p_flags & PF_X)) {
        offset = p.p_offset;
        size = p.p_filesz;
        found = true;
      }
    }
  close(fd);
  return found;
}

std::string loaded_libc() {
  std::string path;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        if (std::strstr(info->dlpi_name, "/libc.so.6")) *static_cast<std::string*>(data) = info->dlpi_name;
        return 0;
      },
      &path);
  return path;
}

const Subject& subject() {
  static const Subject s = [] {
    Subject s;
    const char* file = std::getenv("SYMBOLIZE_BENCH_FILE");
    s.path = file && *file ? file : loaded_libc();
    uint64_t offset = 0, size = 0;
    if (!code_segment(s.path, offset, size)) {
      s.error = "no x86-64 code segment in '" + s.path + "'";
      return s;
    }
    constexpr uint64_t kAddresses = 20000;
    for (uint64_t i = 0; i < kAddresses; ++i) s.offsets.push_back(offset + size * i / kAddresses);
    return s;
  }();
  return s;
}

memtrack::ModuleRef module_ref() { return {subject().path, {}, 0, 0, nullptr}; }

void report_subject(benchmark::State& state, memtrack::Symbolizer& symbolizer, memtrack::Symbolizer::ModuleId id) {
  const auto& located = symbolizer.located(id);
  state.SetLabel(located.path + (located.debug_path.empty() ? "" : " + " + located.debug_path));
}

// The first lookup of each address; opening the module is excluded (BM_Open).
void BM_SymbolizeCold(benchmark::State& state) {
  if (!subject().error.empty()) return state.SkipWithError(subject().error.c_str());
  size_t frames = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto symbolizer = std::make_unique<memtrack::Symbolizer>();
    const auto id = symbolizer->add_module(module_ref());
    symbolizer->located(id);
    state.ResumeTiming();
    for (uint64_t offset : subject().offsets) frames += symbolizer->symbolize(id, offset).size();
    state.PauseTiming();
    if (state.iterations() == 0) report_subject(state, *symbolizer, id);
    symbolizer.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * subject().offsets.size()));
  state.counters["frames/address"] = static_cast<double>(frames) / (state.iterations() * subject().offsets.size());
}
BENCHMARK(BM_SymbolizeCold)->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly(true);

// Every address again: cache hits only.
void BM_SymbolizeCached(benchmark::State& state) {
  if (!subject().error.empty()) return state.SkipWithError(subject().error.c_str());
  memtrack::Symbolizer symbolizer;
  const auto id = symbolizer.add_module(module_ref());
  for (uint64_t offset : subject().offsets) symbolizer.symbolize(id, offset);
  report_subject(state, symbolizer, id);
  for (auto _ : state)
    for (uint64_t offset : subject().offsets) benchmark::DoNotOptimize(symbolizer.symbolize(id, offset).data());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * subject().offsets.size()));
}
BENCHMARK(BM_SymbolizeCached)->Unit(benchmark::kMicrosecond)->Repetitions(5)->ReportAggregatesOnly(true);

// Locating the file and its debug file, reading its symbols, indexing its
// units: once per module.
void BM_Open(benchmark::State& state) {
  if (!subject().error.empty()) return state.SkipWithError(subject().error.c_str());
  for (auto _ : state) {
    memtrack::Symbolizer symbolizer;
    const auto id = symbolizer.add_module(module_ref());
    benchmark::DoNotOptimize(symbolizer.located(id).path.data());
  }
}
BENCHMARK(BM_Open)->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly(true);

}  // namespace
