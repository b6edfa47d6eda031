#include "analyze/stack_sites.h"

namespace memtrack {

StackSites::StackSites() : origins_(1) {}  // site 0: no stack

SiteId StackSites::site_of(uint64_t stack_hash) {
  if (stack_hash == 0) return 0;
  if (auto known = path_of_hash_.find(stack_hash); known != path_of_hash_.end()) {
    uint32_t path = known->second.path;
    if (known->second.single_use) path_of_hash_.erase(known);
    if (path >= site_of_path_.size()) site_of_path_.resize(path + 1, 0);
    SiteId& site = site_of_path_[path];
    if (site == 0) {
      site = static_cast<SiteId>(origins_.size());
      origins_.push_back({Origin::Kind::Path, path});
    }
    return site;
  }
  auto [undefined, added] = site_of_undefined_.try_emplace(stack_hash, static_cast<SiteId>(origins_.size()));
  if (added) origins_.push_back({Origin::Kind::Hash, stack_hash});
  return undefined->second;
}

void StackSites::define(uint64_t stack_hash, uint32_t path, bool own_hash) {
  // A hash an allocation already used must stay for resolve().
  bool single_use = own_hash && !site_of_undefined_.contains(stack_hash);
  path_of_hash_.emplace(stack_hash, HashPath{path, single_use});
}

StackSites::Resolved StackSites::resolve(SiteId site) const {
  const Origin& origin = origins_[site];
  switch (origin.kind) {
    case Origin::Kind::NoStack:
      return {std::nullopt, StackOutcome::NoStack};
    case Origin::Kind::Path:
      return {static_cast<uint32_t>(origin.value), StackOutcome::Complete};
    case Origin::Kind::Hash:
      // Its Stack record came after it, or never.
      if (auto late = path_of_hash_.find(origin.value); late != path_of_hash_.end())
        return {late->second.path, StackOutcome::Complete};
      return {std::nullopt, StackOutcome::Undefined};
  }
  return {};
}

}  // namespace memtrack
