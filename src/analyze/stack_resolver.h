// Stack records turned into call paths as they stream: a chain the kernel's
// walk completed is taken as it is; a raw copy is unwound offline at once,
// with the placements its process had at the definition's time, so that only
// the resulting return addresses need be kept.
//
// Ownership and rules:
// - The resolver owns the unwinder's step cache (UnwindCache); the modules
//   and their CFI belong to the ModuleCatalog passed in, which must outlive
//   the resolver (the cache points at its UnwindModules).
// - resolve() reads placements at the Stack record's (pid, time): the
//   ModuleMap must have seen every record before it, and still hold that
//   process's placements.
// - A raw copy stopped at a mapped file whose CFI is not available here
//   (the file missing) resolves to MissingModule, not NoCfi: it may be
//   resolved again once Module records give the CFI.
// - The stack's own bytes are the only memory read.
// Not thread-safe (the cache): one resolver per thread.
#pragma once

#include <cstdint>
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
  // The call path of a Stack record, with the placements its process had at
  // the record's time: `modules` must have seen every event before it.
  ResolvedStack resolve(const Event& stack_event, const ModuleMap& modules, ModuleCatalog& catalog);

 private:
  ResolvedStack unwind_raw(const Event& stack_event, const ModuleMap& modules, ModuleCatalog& catalog);

  StackUnwinder unwinder_;
  UnwindCache unwind_cache_;
};

}  // namespace memtrack
