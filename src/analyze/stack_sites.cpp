#include "analyze/stack_sites.h"

namespace memtrack {

StackSites::StackSites(bool split_by_thread) : split_by_thread_(split_by_thread), origins_(1) {}  // site 0: no stack

StackSites::Origin StackSites::origin_of(uint64_t stack_hash) {
  if (stack_hash == 0) return {};
  if (auto known = path_of_hash_.find(stack_hash); known != path_of_hash_.end()) {
    uint32_t path = known->second.path;
    if (known->second.single_use) path_of_hash_.erase(known);
    return {Origin::Kind::Path, path};
  }
  used_undefined_.insert(stack_hash);
  return {Origin::Kind::Hash, stack_hash};
}

SiteId StackSites::site_of(uint64_t stack_hash, int32_t pid, int32_t tid) {
  Origin origin = origin_of(stack_hash);
  if (split_by_thread_) {
    origin.pid = pid;
    origin.tid = tid;
    return site_of_origin(origin);
  }
  switch (origin.kind) {
    case Origin::Kind::NoStack:
      return 0;
    case Origin::Kind::Path: {
      if (origin.value >= site_of_path_.size()) site_of_path_.resize(origin.value + 1, 0);
      SiteId& site = site_of_path_[origin.value];
      if (site == 0) {
        site = static_cast<SiteId>(origins_.size());
        origins_.push_back(origin);
      }
      return site;
    }
    case Origin::Kind::Hash:
      return site_of_origin(origin);
  }
  return 0;
}

SiteId StackSites::site_of_origin(const Origin& origin) {
  auto [site, added] = site_of_key_.try_emplace(origin, static_cast<SiteId>(origins_.size()));
  if (added) origins_.push_back(origin);
  return site->second;
}

void StackSites::define(uint64_t stack_hash, uint32_t path, bool own_hash) {
  // A hash an allocation already used must stay for resolve().
  bool single_use = own_hash && !used_undefined_.contains(stack_hash);
  path_of_hash_.emplace(stack_hash, HashPath{path, single_use});
}

StackSites::Resolved StackSites::resolve(SiteId site) const {
  const Origin& origin = origins_[site];
  switch (origin.kind) {
    case Origin::Kind::NoStack:
      return {std::nullopt, StackOutcome::NoStack, origin.pid, origin.tid};
    case Origin::Kind::Path:
      return {static_cast<uint32_t>(origin.value), StackOutcome::Complete, origin.pid, origin.tid};
    case Origin::Kind::Hash:
      // Its Stack record came after it, or never.
      if (auto late = path_of_hash_.find(origin.value); late != path_of_hash_.end())
        return {late->second.path, StackOutcome::Complete, origin.pid, origin.tid};
      return {std::nullopt, StackOutcome::Undefined, origin.pid, origin.tid};
  }
  return {};
}

}  // namespace memtrack
