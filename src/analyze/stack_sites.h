// Which call site (HeapReplay's SiteId) each allocation's stack hash stands
// for, while Stack records and allocations stream in file order.
//
// Ownership and rules:
// - StackSites owns the map from stack hash to call path (CallPaths index)
//   and the SiteIds it hands out: dense, 0 for an allocation without a stack.
// - A hash keeps its first definition; a hash defined again (the kernel's
//   dedup map evicted it) changes nothing.
// - A hash defined before its allocation: the site of its path (hashes with
//   equal paths share it).
// - A hash not defined yet: a site of its own, which resolve() maps to the
//   hash's path if its Stack record came later, or to "undefined".
// - A walk that stopped short is emitted with a hash of its own, for its one
//   allocation (docs/FORMAT.md): such a definition is forgotten once that
//   allocation is seen, so memory follows shared definitions, not
//   allocations (plus the definitions whose allocation failed or was lost,
//   which stay).
// - Split by thread (the constructor's option): a site stands for a path (or
//   undefined hash) in one process and thread, keyed by all three.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include "analyze/heap_replay.h"
#include "analyze/profile.h"

namespace memtrack {

class StackSites {
 public:
  explicit StackSites(bool split_by_thread = false);

  // The site of an allocation with this stack hash (0: none, when not split
  // by thread), made by thread `tid` of process `pid`.
  SiteId site_of(uint64_t stack_hash, int32_t pid = 0, int32_t tid = 0);
  bool defined(uint64_t stack_hash) const { return path_of_hash_.contains(stack_hash); }
  // The first definition of a hash: its path. `own_hash`: the kernel gave the
  // definition a hash of its own (a walk that stopped short).
  void define(uint64_t stack_hash, uint32_t path, bool own_hash);

  // What a site stands for once every record was read: its path, or none
  // (why in `outcome`: NoStack without a stack, Undefined for a hash never
  // defined); its process and thread when split by thread (0 otherwise).
  struct Resolved {
    std::optional<uint32_t> path;
    StackOutcome outcome = StackOutcome::NoStack;
    int32_t pid = 0;
    int32_t tid = 0;
  };
  Resolved resolve(SiteId site) const;

 private:
  struct HashPath {
    uint32_t path = 0;
    bool single_use = false;
  };
  // A site is a path, or a hash still undefined when its allocation came
  // (in one process and thread when split by thread).
  struct Origin {
    enum class Kind : uint8_t { NoStack, Path, Hash } kind = Kind::NoStack;
    uint64_t value = 0;  // the path index, or the hash
    int32_t pid = 0;
    int32_t tid = 0;

    bool operator==(const Origin&) const = default;
    template <typename H>
    friend H AbslHashValue(H state, const Origin& origin) {
      return H::combine(std::move(state), origin.kind, origin.value, origin.pid, origin.tid);
    }
  };

  // The origin of an allocation's hash, without process and thread.
  Origin origin_of(uint64_t stack_hash);
  SiteId site_of_origin(const Origin& origin);

  bool split_by_thread_;
  absl::flat_hash_map<uint64_t, HashPath> path_of_hash_;
  absl::flat_hash_set<uint64_t> used_undefined_;  // hashes an allocation used before their definition
  std::vector<Origin> origins_;                   // by SiteId
  // Unsplit, a path's site is found by index (the hot path); the other
  // origins by key.
  std::vector<SiteId> site_of_path_;  // by path; 0: none yet
  absl::flat_hash_map<Origin, SiteId> site_of_key_;
};

}  // namespace memtrack
