// The distinct call paths of a profile: each resolved stack interned once, so
// memory follows distinct paths, not definitions (raw copies are rarely
// identical byte for byte, their unwound paths often are).
//
// Ownership and rules:
// - CallPaths owns every path; a path is named by its index, which stays
//   valid for the life of the object (paths are never removed).
// - intern() returns the index of an equal path if there is one, else adds
//   it. add_own() adds a path that is never shared (a raw copy that may be
//   unwound again): only it may later be replace()d, so a replacement never
//   changes another definition's path.
// - Movable: the index refers to the paths through a heap-held vector.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <absl/container/flat_hash_set.h>

#include "analyze/profile.h"

namespace memtrack {

struct CallPath {
  std::vector<uint32_t> locations;  // LocationTable indexes, innermost first
  StackOutcome outcome = StackOutcome::Complete;
  bool frame_pointer_fallback = false;
  auto operator<=>(const CallPath&) const = default;
};

class CallPaths {
 public:
  CallPaths();

  uint32_t intern(CallPath path);
  uint32_t add_own(CallPath path);
  // Only for a path from add_own().
  void replace(uint32_t index, CallPath path) { (*paths_)[index] = std::move(path); }
  const CallPath& operator[](uint32_t index) const { return (*paths_)[index]; }

 private:
  using Paths = std::vector<CallPath>;
  // Indexes into the paths, found by content without a second copy of it.
  struct Hash {
    using is_transparent = void;
    const Paths* paths;
    size_t operator()(const CallPath& path) const;
    size_t operator()(uint32_t index) const { return (*this)((*paths)[index]); }
  };
  struct Eq {
    using is_transparent = void;
    const Paths* paths;
    const CallPath& of(const CallPath& path) const { return path; }
    const CallPath& of(uint32_t index) const { return (*paths)[index]; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const { return of(a) == of(b); }
  };

  std::unique_ptr<Paths> paths_;  // on the heap: the index's functors point at it
  absl::flat_hash_set<uint32_t, Hash, Eq> index_;
};

}  // namespace memtrack
