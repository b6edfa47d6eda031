// Builds the Profile of an artifact in one streamed pass: placements
// (ModuleMap), stack definitions resolved as they come (StackResolver), costs
// per stack (SiteCostTracker); then, once, every distinct address is located
// in its module and symbolized, and stacks resolving to the same locations
// merge into one site.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>

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
  // `exact`: the address is an instruction to symbolize as it is, not a
  // return address (whose call is the instruction before it).
  uint32_t location_of(const ResolvedStack& stack, uint64_t address, bool exact);
  void symbolize_locations();
  // Drops leading operator new frames and merges the sites that then have
  // the same path.
  void start_sites_at_allocator_callers();

  ProfileOptions options_;
  ModuleMap module_map_;
  ModuleCatalog catalog_;
  StackResolver resolver_;
  SiteCostTracker costs_;
  Profile profile_;
  // Interned locations: (catalog module, file offset, exact), or (-1,
  // address, exact) outside every mapping.
  std::map<std::tuple<int64_t, uint64_t, bool>, uint32_t> location_index_;
  struct LocationSource {
    int64_t catalog_index = -1;
    bool exact = false;
  };
  std::vector<LocationSource> location_sources_;
};

}  // namespace memtrack
