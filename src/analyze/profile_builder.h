// Builds the Profile of an artifact in one streamed pass: placements
// (ModuleMap), stack definitions resolved as they come (StackResolver), costs
// per stack (SiteCostTracker); then, once, every distinct address is located
// in its module and symbolized, and stacks resolving to the same locations
// merge into one site.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "analyze/module_catalog.h"
#include "analyze/module_map.h"
#include "analyze/profile.h"
#include "analyze/site_costs.h"
#include "analyze/stack_resolver.h"
#include "analyze/suppressions.h"
#include "format/event.h"
#include "format/module_info.h"

namespace memtrack {

struct ProfileOptions {
  EventFilter filter;
  SymbolizerOptions symbols;
  // Keep only sites with a frame whose function contains this; "" keeps all.
  std::string function;
  Suppressions suppressions;
};

class ProfileBuilder {
 public:
  ProfileBuilder(ProfileOptions options, uint64_t start_monotonic_ns);

  void on_event(const Event& event);
  void on_module(const ModuleInfo& module);
  // Call once, after the last event.
  Profile build();

 private:
  uint32_t location_of(const ResolvedStack& stack, uint64_t address);

  ProfileOptions options_;
  ModuleMap module_map_;
  ModuleCatalog catalog_;
  StackResolver resolver_;
  SiteCostTracker costs_;
  Profile profile_;
  // Interned locations: (catalog module, file offset), or (-1, address).
  std::map<std::pair<int64_t, uint64_t>, uint32_t> location_index_;
  std::vector<int64_t> catalog_index_of_location_;
};

}  // namespace memtrack
