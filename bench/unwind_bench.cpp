// What a rule miss costs user space: ModuleCfi::rule_at_return_address on
// this process's libc.so.6, at 4096 distinct offsets spread over its code
// (each looked up once per pass; ModuleCfi keeps no rule cache), and of
// preparing the rules of all its return addresses.
// And the offline unwinders on raw stack copies: StackUnwinder (ours) and
// DwflUnwinder (libdwfl) on the same 64 stacks captured in this process.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <string>
#include <vector>

#include "record/unwind_rules/call_sites.h"
#include "unwind/cfi_rules.h"
#include "unwind/dwfl_unwinder.h"
#include "unwind/stack_unwinder.h"
#include "util/proc_maps.h"

// An unwind of a recorded copy through the unwinder's signature (registers,
// code map, a cache of its own, the copy as stack memory).
inline memtrack::UnwoundStack unwind_copy(const memtrack::StackUnwinder& unwinder, const memtrack::StackDefinition& d,
                                          const memtrack::CodeMap& code) {
  memtrack::UnwindCache cache;
  return unwinder.unwind(d.regs, code, cache, memtrack::StackCopy(d.sp, d.bytes, d.truncated));
}


namespace {

struct LibcCode {
  std::string path;
  std::vector<uint64_t> offsets;  // file offsets in its executable mapping
};

// libc's executable mapping, from /proc/self/maps (the one holding malloc).
const LibcCode& libc_code() {
  static const LibcCode code = [] {
    const auto malloc_address = reinterpret_cast<uint64_t>(&malloc);
    for (const memtrack::MapEntry& m : memtrack::read_maps_file("/proc/self/maps")) {
      const auto& [start, end, offset, perms, path] = std::tie(m.start, m.end, m.offset, m.perms, m.path);
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

// Preparing a file's rules as the unwind learner does at its first mapping:
// every return address of libc (its call sites), with a fresh ModuleCfi per
// pass; one lookup per offset (range 0) or one CFI evaluation per row of
// the table (range 1, rules_at_return_addresses).
void BM_PrepareLibcRules(benchmark::State& state) {
  static const std::vector<uint64_t> offsets = memtrack::return_address_offsets(libc_code().path);
  const bool by_row = state.range(0) == 1;
  for (auto _ : state) {
    state.PauseTiming();
    auto cfi = std::make_unique<memtrack::ModuleCfi>(libc_code().path);
    state.ResumeTiming();
    if (by_row) {
      benchmark::DoNotOptimize(cfi->rules_at_return_addresses(offsets));
    } else {
      benchmark::DoNotOptimize(lookup_all(*cfi, offsets));
    }
    state.PauseTiming();
    cfi.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(offsets.size()));
}
BENCHMARK(BM_PrepareLibcRules)->Arg(0)->Arg(1);

// ---- Offline unwinding of raw stacks ----

// This process's executable mappings, one UnwindModule per file.
class SelfCodeMap : public memtrack::CodeMap {
 public:
  SelfCodeMap() {
    for (const memtrack::MapEntry& m : memtrack::read_maps_file("/proc/self/maps")) {
      const auto& [start, end, offset, perms, path] = std::tie(m.start, m.end, m.offset, m.perms, m.path);
      if (path == "[stack]") stack_end = end;
      if (perms.size() < 3 || perms[2] != 'x') continue;
      memtrack::CodeRange r{start, end, offset, nullptr};
      if (!path.empty() && path[0] == '/') {
        auto& module = modules_[path];
        if (!module) module = std::make_unique<memtrack::UnwindModule>(path);
        r.module = module.get();
      }
      ranges_.push_back(r);
      mappings.push_back({path, start, end, offset});
    }
    std::sort(ranges_.begin(), ranges_.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  }
  const memtrack::CodeRange* find(uint64_t address) const override {
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), address,
                               [](uint64_t a, const memtrack::CodeRange& r) { return a < r.start; });
    if (it == ranges_.begin() || address >= (--it)->end) return nullptr;
    return &*it;
  }

  uint64_t stack_end = 0;
  std::vector<memtrack::DwflMapping> mappings;

 private:
  std::vector<memtrack::CodeRange> ranges_;
  std::map<std::string, std::unique_ptr<memtrack::UnwindModule>> modules_;
};

// A raw stack as the kernel records it, taken at one instruction here.
__attribute__((noinline)) int capture_stack(memtrack::StackDefinition* out, uint64_t stack_end) {
  uint64_t pc, rsp, rbp;
  __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(pc), "=r"(rsp), "=r"(rbp));
  constexpr uint64_t kBudget = 64 * 1024;
  out->sp = rsp;
  out->regs.assign(17, 0);
  out->regs[16] = pc;
  out->regs[7] = rsp;
  out->regs[6] = rbp;
  const uint64_t size = std::min(stack_end - rsp, kBudget);
  out->bytes.resize(size);
  std::memcpy(out->bytes.data(), reinterpret_cast<const void*>(rsp), size);
  out->truncated = size == kBudget;
  return static_cast<int>(size & 1);
}

// Two frame shapes, chosen level by level by the bits of `path`: a
// frame-pointer frame and an rsp-based one with a larger frame.
__attribute__((noinline)) int level_rsp(int depth, unsigned path, memtrack::StackDefinition* out, uint64_t end);
__attribute__((noinline, optimize("no-omit-frame-pointer"))) int level_fp(int depth, unsigned path,
                                                                         memtrack::StackDefinition* out,
                                                                         uint64_t end) {
  volatile char pad[32];
  pad[depth & 31] = static_cast<char>(depth);
  int r = depth == 0 ? capture_stack(out, end)
                     : (path & 1 ? level_fp : level_rsp)(depth - 1, path >> 1, out, end);
  return r + pad[depth & 31];  // live after the call: no tail call
}
int level_rsp(int depth, unsigned path, memtrack::StackDefinition* out, uint64_t end) {
  volatile char pad[160];
  pad[depth % 160] = static_cast<char>(depth);
  int r = depth == 0 ? capture_stack(out, end)
                     : (path & 1 ? level_fp : level_rsp)(depth - 1, path >> 1, out, end);
  return r + pad[depth % 160];
}

struct RawStacks {
  SelfCodeMap map;
  std::vector<memtrack::StackDefinition> stacks;
  double mean_frames = 0;
};

// 64 distinct call paths, 7 levels deep under the benchmark's own frames.
const RawStacks& raw_stacks() {
  static const RawStacks raw = [] {
    RawStacks r;
    for (unsigned path = 0; path < 64; ++path) {
      memtrack::StackDefinition d;
      level_fp(7, path, &d, r.map.stack_end);
      r.stacks.push_back(std::move(d));
    }
    // Both unwinders must agree and complete, or the figures compare nothing.
    memtrack::DwflUnwinder dwfl(r.map.mappings);
    size_t frames = 0;
    for (const auto& d : r.stacks) {
      const auto own = unwind_copy(memtrack::StackUnwinder(), d, r.map);
      const auto theirs = dwfl.unwind(d);
      if (own.stop != memtrack::UnwindStop::Complete || own.return_addresses != theirs.return_addresses)
        throw std::runtime_error(std::string("the unwinders disagree: ours ") + unwind_stop_name(own.stop) + ", " +
                                 std::to_string(own.return_addresses.size()) + " frames, libdwfl's " +
                                 unwind_stop_name(theirs.stop) + ", " +
                                 std::to_string(theirs.return_addresses.size()));
      frames += own.return_addresses.size();
    }
    r.mean_frames = static_cast<double>(frames) / static_cast<double>(r.stacks.size());
    return r;
  }();
  return raw;
}

// Ours, with warm rule caches (the steady state of a report: many stacks
// through the same code). One stack per iteration.
void BM_OwnUnwinder(benchmark::State& state) {
  const RawStacks& raw = raw_stacks();
  const memtrack::StackUnwinder unwinder;
  memtrack::UnwindCache cache;
  size_t i = 0;
  for (auto _ : state) {
    const memtrack::StackDefinition& d = raw.stacks[i++ & 63];
    auto result = unwinder.unwind(d.regs, raw.map, cache, memtrack::StackCopy(d.sp, d.bytes, d.truncated));
    benchmark::DoNotOptimize(result.return_addresses.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["frames"] = raw.mean_frames;
}
BENCHMARK(BM_OwnUnwinder);

// libdwfl on the same stacks, its modules reported once.
void BM_DwflUnwinder(benchmark::State& state) {
  const RawStacks& raw = raw_stacks();
  memtrack::DwflUnwinder unwinder(raw.map.mappings);
  size_t i = 0;
  for (auto _ : state) {
    auto result = unwinder.unwind(raw.stacks[i++ & 63]);
    benchmark::DoNotOptimize(result.return_addresses.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["frames"] = raw.mean_frames;
}
BENCHMARK(BM_DwflUnwinder);

}  // namespace
