#include "analyze/call_paths.h"

#include <absl/hash/hash.h>

namespace memtrack {

CallPaths::CallPaths() : paths_(std::make_unique<Paths>()), index_(0, Hash{paths_.get()}, Eq{paths_.get()}) {}

size_t CallPaths::Hash::operator()(const CallPath& path) const {
  return absl::HashOf(path.locations, static_cast<int>(path.outcome), path.frame_pointer_fallback);
}

uint32_t CallPaths::intern(CallPath path) {
  if (auto known = index_.find(path); known != index_.end()) return *known;
  uint32_t index = add_own(std::move(path));
  index_.insert(index);
  return index;
}

uint32_t CallPaths::add_own(CallPath path) {
  paths_->push_back(std::move(path));
  return static_cast<uint32_t>(paths_->size() - 1);
}

}  // namespace memtrack
