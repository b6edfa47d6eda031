// What an intercepted allocator call costs on this machine. The kernel's
// uprobe cost varies tenfold between machines (0.74 us per call on one VM,
// ~6 us on another with page-table isolation, where a system call alone takes
// 1 us or more), so `record` measures it once at start, on itself, and warns
// before the target runs when recording it will be slow.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace memtrack {

class BpfSession;

struct ProbeCost {
  // Added to one call of a function probed at entry and return by an empty
  // program, the way allocation functions are probed: the kernel's floor.
  uint64_t probe_floor_ns = 0;
  uint64_t syscall_ns = 0;  // one getppid(): the price of entering the kernel here
};

// Times a few hundred calls of a function of memtrack itself with an empty
// probe attached (for this process only), against the same calls without;
// takes milliseconds. nullopt with `error` when the probe cannot be attached.
std::optional<ProbeCost> measure_probe_cost(BpfSession& session, std::string* error);

// How the cost is projected, for the warning: a typical allocator call takes
// 20-50 ns, and an allocation-heavy program makes about a million a second.
constexpr uint64_t kTypicalAllocatorCallNs = 40;
// Slowdown of a program making a million allocator calls a second.
double projected_slowdown(const ProbeCost& cost);
// The warning shown when probe_floor_ns >= threshold_ns.
std::optional<std::string> probe_cost_warning(const ProbeCost& cost, uint64_t threshold_ns);

// What `record` does at start: measures, warns on stderr (unless quiet) and
// returns the trailer counters (probe_floor_ns, syscall_ns).
std::map<std::string, uint64_t> check_probe_cost(BpfSession& session, uint64_t threshold_ns, bool quiet);

}  // namespace memtrack
