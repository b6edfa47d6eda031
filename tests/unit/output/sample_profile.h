// A hand-made Profile for the output tests: two modules (one symbolized with
// a build id, one not), an address with an inline level, a function seen at
// two addresses, locations without frames (inside a module and outside every
// module) and four sites, one of them without a stack.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "analyze/profile.h"

namespace memtrack::testing {

inline ProfileSite make_site(std::vector<uint32_t> locations, SiteCosts costs) {
  ProfileSite site;
  site.outcome = locations.empty() ? StackOutcome::NoStack : StackOutcome::Complete;
  site.locations = std::move(locations);
  site.costs = costs;
  return site;
}

inline SiteCosts make_costs(uint64_t allocations, uint64_t bytes, uint64_t leaked_allocations, uint64_t leaked_bytes,
                            uint64_t peak_bytes, uint64_t temporary_allocations) {
  SiteCosts c;
  c.allocations = allocations;
  c.allocated_bytes = bytes;
  c.leaked_allocations = leaked_allocations;
  c.leaked_bytes = leaked_bytes;
  c.peak_bytes = peak_bytes;
  c.temporary_allocations = temporary_allocations;
  return c;
}

inline Profile sample_profile() {
  Profile p;
  p.modules.push_back({"/usr/bin/app", "abcdef0123456789", 0x400000, 0x480000, 0, true});
  p.modules.push_back({"/usr/lib/x86_64-linux-gnu/libfoo.so.1", "", 0x7f0000000000, 0x7f0000010000, 0x1000, false});
  // 0: inline_helper inlined into make_widget (innermost first).
  p.locations.push_back({0x401010, 0, 0x1010,
                         {{"inline_helper", "/src/app/util.h", 12, 5, true},
                          {"make_widget", "/src/app/widget.cpp", 40, 3, false}}});
  // 1: main.
  p.locations.push_back({0x402020, 0, 0x2020, {{"main", "/src/app/main.cpp", 7, 0, false}}});
  // 2: in libfoo, nothing known.
  p.locations.push_back({0x7f0000002234, 1, 0x2234, {}});
  // 3: make_widget again, another line: the same function.
  p.locations.push_back({0x403030, 0, 0x3030, {{"make_widget", "/src/app/widget.cpp", 55, 0, false}}});
  // 4: outside every module.
  p.locations.push_back({0xdead0000, -1, 0, {}});
  //                    allocs bytes leaked-n leaked-b peak temporary
  p.sites.push_back(make_site({0, 1}, make_costs(10, 1000, 2, 200, 300, 4)));
  p.sites.push_back(make_site({2, 3, 1}, make_costs(5, 500, 0, 0, 0, 5)));
  p.sites.push_back(make_site({}, make_costs(3, 30, 1, 10, 10, 0)));
  p.sites.push_back(make_site({4, 1}, make_costs(1, 4096, 1, 4096, 4096, 0)));
  for (const ProfileSite& site : p.sites) {
    p.totals.allocations += site.costs.allocations;
    p.totals.allocated_bytes += site.costs.allocated_bytes;
    p.totals.leaked_allocations += site.costs.leaked_allocations;
    p.totals.leaked_bytes += site.costs.leaked_bytes;
  }
  return p;
}

}  // namespace memtrack::testing
