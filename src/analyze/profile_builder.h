// Builds the Profile of an artifact in one streamed pass, next to the
// HeapReplay that counts the costs.
//
// Ownership and rules (each job is a part with a header of its own):
// - ModuleMap: placements from Mapping/Fork/Exec/Exit records. An exited
//   process's placements are dropped 1 s of trace time after its exit
//   (ExitedProcesses), unless raw copies of it wait for Module records.
// - StackResolver: each Stack record resolved as it comes into return
//   addresses, with the placements its process had then.
// - LocationTable: each address interned once as (module, file offset);
//   symbolized once at the end. A Stack record's Python frames go into its
//   path just inside the native frame that ran them (their eval loop's),
//   named at the end by the PythonCode records (PythonCodes).
// - CallPaths: the resolved paths, deduplicated, so memory follows distinct
//   paths and code addresses, not definitions. A raw copy that stopped at a
//   file missing here gets a path of its own, unwound again at build() with
//   the artifact's Module records (RawCopyRetries).
// - StackSites: stack hash -> SiteId, handed to the HeapReplay with each
//   allocation; resolved to paths at build().
// - build(): sites with equal (locations, outcome, and process and thread
//   with split_by_thread) merged, leading operator
//   new frames dropped, then the function filter, suppressions and the
//   runtime's own allocations applied to the replay's per-site costs.
// Movable; not thread-safe (one thread feeds it).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include <absl/container/flat_hash_map.h>

#include "analyze/call_paths.h"
#include "analyze/heap_replay.h"
#include "analyze/late_records.h"
#include "analyze/location_table.h"
#include "analyze/module_catalog.h"
#include "analyze/module_map.h"
#include "analyze/profile.h"
#include "analyze/python_codes.h"
#include "analyze/stack_resolver.h"
#include "analyze/stack_sites.h"
#include "analyze/suppressions.h"
#include "format/event.h"
#include "format/module_info.h"

namespace memtrack {

struct ProfileOptions {
  SymbolizerOptions symbols;
  // Keep only sites with a frame whose function contains this; "" keeps all.
  std::string function;
  Suppressions suppressions;
  // Count the built-in runtime allocations (is_runtime_allocation) as leaks
  // like any other, instead of apart.
  bool show_runtime_leaks = false;
  // One site per call path, process and thread (ProfileSite::pid, tid), for
  // outputs that label samples by them.
  bool split_by_thread = false;
};

class ProfileBuilder {
 public:
  explicit ProfileBuilder(ProfileOptions options);

  // Every record in file order; returns the call site of an allocation (0
  // for other records), for HeapReplay::on_event.
  SiteId on_event(const Event& event);
  // The call site of an allocation with this stack hash by this process and
  // thread, as on_event names it (an aggregated recording's sites).
  SiteId allocation_site(uint64_t stack_hash, int32_t pid, int32_t tid) { return sites_.site_of(stack_hash, pid, tid); }
  void on_module(const ModuleInfo& module);
  // Call once, after the last event, with the replay of the same events
  // (finished).
  Profile build(const HeapReplay& heap);

 private:
  void on_stack(const Event& stack_event);
  CallPath call_path_of(const ResolvedStack& stack, const StackDefinition& definition);
  // The mapping holding the address's instruction: `exact`, the address is an
  // instruction to symbolize as it is, not a return address (whose call is
  // the instruction before it).
  const Placement* placement_of(const ResolvedStack& stack, uint64_t address, bool exact) const;
  uint32_t location_of(const Placement* placement, uint64_t address, bool exact);
  // The location of a frame (kLeftOut: not shown), from frame_locations_
  // when `reuse`: the stack's process has not changed its mappings since.
  uint32_t frame_location(const ResolvedStack& stack, uint64_t address, bool exact, bool reuse);
  static constexpr uint32_t kLeftOut = UINT32_MAX;
  // A Mapping, Fork, Exec or Exit for the module map (and its forget()):
  // what frame_locations_ holds may no longer be true.
  void mappings_changed() {
    if (!frame_locations_.empty()) frame_locations_.clear();
  }
  void retry_missing_modules();
  std::vector<ProfileSite> sites_of(const std::vector<SiteCosts>& costs) const;
  // Drops leading operator new frames and merges the sites that then have
  // the same path.
  static void start_sites_at_allocator_callers(Profile& profile);

  ProfileOptions options_;
  ModuleMap module_map_;
  std::unique_ptr<ModuleCatalog> catalog_;  // on the heap: the builder moves, the catalog does not
  StackResolver resolver_;
  ExitedProcesses exited_;
  RawCopyRetries retries_;
  LocationTable locations_;
  PythonCodes python_codes_;
  CallPaths paths_;
  StackSites sites_;
  std::array<uint64_t, kStackOutcomeCount> definitions_by_outcome_{};
  // The location of every frame resolved since the module map last changed,
  // by (address, pid << 1 | exact): most frames of a new call path are
  // frames of earlier ones, and placing and interning one costs ~400
  // instructions.
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, uint32_t> frame_locations_;
  // The first exec'ed executable (its image's first mapping).
  std::string main_executable_;
};

}  // namespace memtrack
