// Stack records turned into call paths as they stream: a chain the kernel's
// walk completed is kept as it is; a raw copy is unwound offline at once,
// with the placements its process had at the definition's time, so only the
// resulting return addresses are kept (memory per distinct stack, not per
// copied byte).
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "analyze/module_catalog.h"
#include "analyze/module_map.h"
#include "analyze/profile.h"
#include "format/event.h"
#include "unwind/stack_unwinder.h"

namespace memtrack {

struct ResolvedStack {
  int32_t pid = 0;           // the process and time of the definition: where
  uint64_t timestamp = 0;    // its addresses are resolved
  std::vector<uint64_t> return_addresses;  // innermost (the allocator's caller) first
  std::vector<uint32_t> exact_pcs;         // UnwoundStack::exact_pcs
  StackOutcome outcome = StackOutcome::Complete;
  bool frame_pointer_fallback = false;
};

class StackResolver {
 public:
  // `modules` must have seen every event before the Stack record.
  StackResolver(const ModuleMap& modules, ModuleCatalog& catalog);

  void on_stack(const Event& stack_event);
  // Unwinds again the raw copies that stopped at a module whose file was
  // missing: Module records (record --embed-modules) come last in an
  // artifact, so their CFI is only known now. Call once, after every event.
  void retry_missing_modules();

  // By stack hash. A hash defined twice (the kernel's dedup map evicted it)
  // keeps its first definition.
  const std::unordered_map<uint64_t, ResolvedStack>& stacks() const { return stacks_; }
  const std::array<uint64_t, kStackOutcomeCount>& definitions_by_outcome() const { return by_outcome_; }

 private:
  ResolvedStack unwind_raw(const Event& stack_event);

  const ModuleMap& modules_;
  ModuleCatalog& catalog_;
  StackUnwinder unwinder_;
  std::unordered_map<uint64_t, ResolvedStack> stacks_;
  std::array<uint64_t, kStackOutcomeCount> by_outcome_{};
  // Stack records kept for retry_missing_modules(), their copied bytes
  // bounded by kMaxPendingBytes (beyond it, the first result stands).
  static constexpr size_t kMaxPendingBytes = 64 << 20;
  std::vector<Event> pending_;
  size_t pending_bytes_ = 0;
};

}  // namespace memtrack
