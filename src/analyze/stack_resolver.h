// Stack records turned into call paths as they stream: a chain the kernel's
// walk completed is taken as it is; a raw copy is unwound offline at once,
// with the placements its process had at the definition's time, so that only
// the resulting return addresses need be kept.
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
};

}  // namespace memtrack
