// Builds the Profile of an artifact in one streamed pass: placements
// (ModuleMap); each Stack record resolved as it comes (StackResolver) into a
// call path of interned locations (module and file offset), paths
// deduplicated, so memory follows distinct paths and code addresses, not
// definitions (raw copies are rarely identical); costs per call path
// (SiteCostTracker). At the end every distinct location is symbolized once.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <absl/hash/hash.h>

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
  // Count the built-in runtime allocations (is_runtime_allocation) as leaks
  // like any other, instead of apart.
  bool show_runtime_leaks = false;
  // One site per call path, process and thread (ProfileSite::pid, tid), for
  // exports that label samples by them.
  bool split_by_thread = false;
};

class ProfileBuilder {
 public:
  ProfileBuilder(ProfileOptions options, uint64_t start_monotonic_ns);
  // Members refer to each other (the resolver to the module map, the path
  // index to the paths): not movable.
  ProfileBuilder(ProfileBuilder&&) = delete;
  ProfileBuilder& operator=(ProfileBuilder&&) = delete;

  void on_event(const Event& event);
  void on_module(const ModuleInfo& module);
  // Call once, after the last event.
  Profile build();

 private:
  struct CallPath {
    std::vector<uint32_t> locations;  // innermost first
    StackOutcome outcome = StackOutcome::Complete;
    bool frame_pointer_fallback = false;
    auto operator<=>(const CallPath&) const = default;
  };

  void on_stack(const Event& stack_event);
  CallPath call_path_of(const ResolvedStack& stack);
  // `exact`: the address is an instruction to symbolize as it is, not a
  // return address (whose call is the instruction before it).
  uint32_t location_of(const ResolvedStack& stack, uint64_t address, bool exact);
  // Unwinds again the raw copies that stopped at a module whose file was
  // missing: Module records (record --embed-modules) come last in an
  // artifact, so their CFI is only known at the end.
  void retry_missing_modules();
  // The site key of an allocation's stack hash (SiteCostTracker): 0 for
  // none, path + 1 once its Stack record was read, kUnresolvedBase + n
  // before (unresolved_hashes_[n]).
  uint64_t site_key(uint64_t stack_hash);
  // With split_by_thread: the cost key of (site key, pid, tid), an index in
  // thread_sites_.
  uint64_t thread_site_key(uint64_t site, int32_t pid, int32_t tid);
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
  std::vector<CallPath> paths_;
  // Indexes into paths_, found by content without a second copy of it.
  struct PathHash {
    using is_transparent = void;
    const std::vector<CallPath>* paths;
    size_t operator()(const CallPath& path) const;
    size_t operator()(uint32_t index) const { return (*this)((*paths)[index]); }
  };
  struct PathEq {
    using is_transparent = void;
    const std::vector<CallPath>* paths;
    const CallPath& of(const CallPath& path) const { return path; }
    const CallPath& of(uint32_t index) const { return (*paths)[index]; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const { return of(a) == of(b); }
  };
  absl::flat_hash_set<uint32_t, PathHash, PathEq> path_index_{0, PathHash{&paths_}, PathEq{&paths_}};
  struct HashPath {
    uint32_t path = 0;
    // A walk that stopped short is emitted with a hash of its own, for its
    // one allocation (docs/FORMAT.md): forgotten once that allocation is seen,
    // so this map follows shared definitions, not allocations (plus the
    // definitions whose allocation failed or was lost, which stay).
    bool single_use = false;
  };
  absl::flat_hash_map<uint64_t, HashPath> path_of_hash_;  // the first definition of each hash
  static constexpr uint64_t kUnresolvedBase = uint64_t{1} << 40;  // above every path + 1
  absl::flat_hash_map<uint64_t, uint64_t> unresolved_key_of_hash_;
  std::vector<uint64_t> unresolved_hashes_;
  std::vector<std::tuple<uint64_t, int32_t, int32_t>> thread_sites_;
  absl::flat_hash_map<std::tuple<uint64_t, int32_t, int32_t>, uint64_t> thread_site_index_;
  uint64_t retries_skipped_ = 0;  // raw copies beyond kMaxPendingBytes
  // Raw copies kept for retry_missing_modules(), each with a path of its own
  // (not shared, so that it can be replaced); their bytes are bounded by
  // kMaxPendingBytes, beyond which the first result stands.
  static constexpr size_t kMaxPendingBytes = 64 << 20;
  struct Pending {
    Event stack_event;
    uint32_t path;
  };
  std::vector<Pending> pending_;
  absl::flat_hash_set<int32_t> pending_pids_;  // their placements are kept after exit
  // Exited processes whose placements are dropped once the trace is
  // kForgetAfterNs past their exit (a Stack record may still come a little
  // after its process's Exit: the recorder orders records within a margin).
  static constexpr uint64_t kForgetAfterNs = 1'000'000'000;
  std::deque<std::pair<uint64_t, int32_t>> exits_;   // (exit time, pid), in file order
  absl::flat_hash_map<int32_t, uint64_t> exit_time_;  // pid -> its latest exit, while not forgotten
  void forget_exited_before(uint64_t timestamp);
  size_t pending_bytes_ = 0;
  // Interned locations: (catalog module, file offset, exact), or (-1,
  // address, exact) outside every mapping.
  absl::flat_hash_map<std::tuple<int64_t, uint64_t, bool>, uint32_t> location_index_;
  struct LocationSource {
    int64_t catalog_index = -1;
    bool exact = false;
  };
  std::vector<LocationSource> location_sources_;
  // The first exec'ed executable (its image's first mapping): pprof shows
  // the first mapping as the main binary.
  std::string main_executable_;
};

}  // namespace memtrack
