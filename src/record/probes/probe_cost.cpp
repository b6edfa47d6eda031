#include "record/probes/probe_cost.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "record/probes/bpf_session.h"
#include "record/process/proc_fs.h"

// The probed function, in assembly so that its first instruction is known:
// a one-byte push, which the kernel emulates in the breakpoint trap like the
// instructions memtrack probes in allocators (probe_placement.h). A
// single-stepped instruction would cost ten times more, a 5-byte NOP less.
asm(R"(
    .pushsection .text
    .globl memtrack_probe_floor_target
    .hidden memtrack_probe_floor_target
    .type memtrack_probe_floor_target, @function
memtrack_probe_floor_target:
    push %rbx
    pop %rbx
    ret
    .size memtrack_probe_floor_target, . - memtrack_probe_floor_target
    .popsection
)");
extern "C" void memtrack_probe_floor_target();

namespace memtrack {

namespace {

// Enough samples for a stable median in a few milliseconds even at ~10 us a
// hit; the first hits (the kernel sets up the process's uprobe pages) are
// not counted.
constexpr int kSamples = 301;
constexpr int kWarmUpCalls = 16;

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

// Each call timed alone, so that a call preempted by another task is an
// outlier the median ignores (the machine is often shared).
template <class Call>
uint64_t median_call_ns(Call call) {
  std::vector<uint64_t> samples(kSamples);
  for (uint64_t& sample : samples) {
    uint64_t start = now_ns();
    call();
    sample = now_ns() - start;
  }
  std::nth_element(samples.begin(), samples.begin() + kSamples / 2, samples.end());
  return samples[kSamples / 2];
}

std::string microseconds(uint64_t ns) { return fmt::format("{:.1f} \u00b5s", static_cast<double>(ns) / 1000); }

}  // namespace

std::optional<ProbeCost> measure_probe_cost(BpfSession& session, std::string* error) {
  auto address = reinterpret_cast<uint64_t>(&memtrack_probe_floor_target);
  std::optional<MapEntry> mapping;
  for (const MapEntry& entry : read_maps(getpid()))
    if (entry.executable() && !entry.path.empty() && address >= entry.start && address < entry.end) mapping = entry;
  if (!mapping) {
    *error = "memtrack's own code is not in a mapped file";
    return std::nullopt;
  }
  uint64_t unprobed = median_call_ns(memtrack_probe_floor_target);
  uint64_t bare_clock = median_call_ns([] {});
  uint64_t kernel_entry = median_call_ns([] { syscall(SYS_getppid); });
  bool attached = session.attach_floor_probe(mapping->path, address - mapping->start + mapping->offset, error);
  std::optional<ProbeCost> cost;
  if (attached) {
    for (int i = 0; i < kWarmUpCalls; ++i) memtrack_probe_floor_target();
    uint64_t probed = median_call_ns(memtrack_probe_floor_target);
    cost = ProbeCost{probed > unprobed ? probed - unprobed : 0, kernel_entry > bare_clock ? kernel_entry - bare_clock : 0};
  }
  // Closing waits for an RCU grace period: in the background.
  session.detach_process(getpid());
  return cost;
}

double projected_slowdown(const ProbeCost& cost) { return 1.0 + static_cast<double>(cost.probe_floor_ns) / 1000.0; }

std::optional<std::string> probe_cost_warning(const ProbeCost& cost, uint64_t threshold_ns) {
  if (cost.probe_floor_ns < threshold_ns) return std::nullopt;
  return fmt::format(
      "memtrack: warning: each intercepted allocator call will cost about {} here\n"
      "  (the kernel's uprobe floor, measured at start; a system call takes {}),\n"
      "  {:.0f}x a typical allocator call of {} ns: a program making a million\n"
      "  allocator calls a second runs about {:.1f}x slower while recorded\n"
      "  (shown from --probe-cost-warning {} ns)\n",
      microseconds(cost.probe_floor_ns), microseconds(cost.syscall_ns),
      static_cast<double>(cost.probe_floor_ns) / kTypicalAllocatorCallNs, kTypicalAllocatorCallNs,
      projected_slowdown(cost), threshold_ns);
}

std::map<std::string, uint64_t> check_probe_cost(BpfSession& session, uint64_t threshold_ns, bool quiet) {
  std::string error;
  std::optional<ProbeCost> cost = measure_probe_cost(session, &error);
  if (!cost) {
    if (!quiet) std::fprintf(stderr, "memtrack: note: cannot measure the probe cost: %s\n", error.c_str());
    return {};
  }
  if (std::optional<std::string> warning = probe_cost_warning(*cost, threshold_ns); warning && !quiet)
    std::fputs(warning->c_str(), stderr);
  return {{"probe_floor_ns", cost->probe_floor_ns}, {"syscall_ns", cost->syscall_ns}};
}

}  // namespace memtrack
