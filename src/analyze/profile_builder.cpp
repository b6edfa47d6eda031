#include "analyze/profile_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <map>

#include "util/hex.h"

namespace memtrack {
namespace {

bool site_calls(const Profile& profile, const ProfileSite& site, const std::string& function) {
  for (uint32_t index : site.locations)
    for (const SourceFrame& frame : profile.locations[index].frames)
      if (frame.function.find(function) != std::string::npos) return true;
  return false;
}

}  // namespace

ProfileBuilder::ProfileBuilder(ProfileOptions options, uint64_t start_monotonic_ns)
    : options_(std::move(options)),
      catalog_(options_.symbols),
      resolver_(module_map_, catalog_),
      costs_(options_.filter, start_monotonic_ns) {}

void ProfileBuilder::on_event(const Event& event) {
  forget_exited_before(event.timestamp);
  switch (event.type) {
    case EventType::Mapping:
      if (main_executable_.empty() && event.mapping && event.mapping->new_image) main_executable_ = event.mapping->path;
      module_map_.on_event(event);
      return;
    case EventType::Stack:
      if (event.stack) on_stack(event);
      return;
    case EventType::Fork:
      exit_time_.erase(event.pid);  // the pid is used again: its placements stay
      module_map_.on_event(event);
      break;
    case EventType::Exec:
      module_map_.on_event(event);
      break;
    case EventType::Exit:
      module_map_.on_event(event);
      exits_.emplace_back(event.timestamp, event.pid);
      exit_time_[event.pid] = event.timestamp;
      break;
    default:
      break;
  }
  uint64_t site = 0;
  if (is_allocation(event.type)) {
    site = site_key(event.stack_hash);
    if (options_.split_by_thread) site = thread_site_key(site, event.pid, event.tid);
  }
  costs_.on_event(event, site);
}

uint64_t ProfileBuilder::thread_site_key(uint64_t site, int32_t pid, int32_t tid) {
  auto [it, added] = thread_site_index_.try_emplace(std::tuple{site, pid, tid}, thread_sites_.size());
  if (added) thread_sites_.emplace_back(site, pid, tid);
  return it->second;
}

// Stacks are resolved as they come: an exited process's placements are only
// needed for a Stack record that comes a little late, and for its raw copies
// waiting for Module records.
void ProfileBuilder::forget_exited_before(uint64_t timestamp) {
  while (!exits_.empty() && exits_.front().first + kForgetAfterNs < timestamp) {
    auto [exit_ns, pid] = exits_.front();
    exits_.pop_front();
    auto latest = exit_time_.find(pid);
    if (latest == exit_time_.end() || latest->second != exit_ns) continue;  // used again since
    exit_time_.erase(latest);
    if (!pending_pids_.contains(pid)) module_map_.forget(pid);
  }
}

uint64_t ProfileBuilder::site_key(uint64_t stack_hash) {
  if (stack_hash == 0) return 0;
  if (auto known = path_of_hash_.find(stack_hash); known != path_of_hash_.end()) {
    uint64_t key = known->second.path + 1;
    if (known->second.single_use) path_of_hash_.erase(known);
    return key;
  }
  auto [unresolved, added] = unresolved_key_of_hash_.try_emplace(stack_hash, kUnresolvedBase + unresolved_hashes_.size());
  if (added) unresolved_hashes_.push_back(stack_hash);
  return unresolved->second;
}

void ProfileBuilder::on_stack(const Event& stack_event) {
  const StackDefinition& definition = *stack_event.stack;
  // A hash defined again (the kernel's dedup map evicted it) keeps its
  // first definition.
  if (path_of_hash_.contains(definition.hash)) return;
  CallPath path = call_path_of(resolver_.resolve(stack_event));
  ++profile_.definitions_by_outcome[static_cast<size_t>(path.outcome)];
  uint32_t index = static_cast<uint32_t>(paths_.size());
  bool retry = path.outcome == StackOutcome::MissingModule;
  if (retry && pending_bytes_ + definition.bytes.size() > kMaxPendingBytes) {
    ++retries_skipped_;
    retry = false;
  }
  if (retry) {
    pending_bytes_ += definition.bytes.size();
    pending_.push_back({stack_event, index});
    pending_pids_.insert(stack_event.pid);
    paths_.push_back(std::move(path));
  } else if (auto known = path_index_.find(path); known != path_index_.end()) {
    index = *known;
  } else {
    paths_.push_back(std::move(path));
    path_index_.insert(index);
  }
  bool single_use = !definition.bytes.empty() && definition.end != StackEnd::NotWalked &&
                    !unresolved_key_of_hash_.contains(definition.hash);
  path_of_hash_.emplace(definition.hash, HashPath{index, single_use});
}

size_t ProfileBuilder::PathHash::operator()(const CallPath& path) const {
  return absl::HashOf(path.locations, static_cast<int>(path.outcome), path.frame_pointer_fallback);
}

ProfileBuilder::CallPath ProfileBuilder::call_path_of(const ResolvedStack& stack) {
  CallPath path;
  path.outcome = stack.outcome;
  path.frame_pointer_fallback = stack.frame_pointer_fallback;
  for (size_t i = 0; i < stack.return_addresses.size(); ++i) {
    bool exact = std::find(stack.exact_pcs.begin(), stack.exact_pcs.end(), i) != stack.exact_pcs.end();
    path.locations.push_back(location_of(stack, stack.return_addresses[i], exact));
  }
  return path;
}

void ProfileBuilder::retry_missing_modules() {
  for (const Pending& pending : pending_) {
    CallPath again = call_path_of(resolver_.resolve(pending.stack_event));
    --profile_.definitions_by_outcome[static_cast<size_t>(paths_[pending.path].outcome)];
    ++profile_.definitions_by_outcome[static_cast<size_t>(again.outcome)];
    paths_[pending.path] = std::move(again);
  }
  std::vector<Pending>().swap(pending_);
  pending_bytes_ = 0;
}

void ProfileBuilder::on_module(const ModuleInfo& module) { catalog_.add_embedded(module); }

uint32_t ProfileBuilder::location_of(const ResolvedStack& stack, uint64_t address, bool exact) {
  // The placement holding the call instruction (before a return address).
  uint64_t lookup = exact || address == 0 ? address : address - 1;
  const Placement* placement = module_map_.placement_at(stack.pid, lookup, stack.timestamp);
  std::tuple<int64_t, uint64_t, bool> key{-1, address, exact};
  if (placement && placement->mapping) {
    uint32_t module = catalog_.index_of(*placement->mapping, placement->start);
    key = {module, address - placement->start + placement->mapping->file_offset, exact};
  }
  auto [it, added] = location_index_.try_emplace(key, static_cast<uint32_t>(profile_.locations.size()));
  if (added) {
    ProfileLocation location;
    location.address = address;
    location.file_offset = std::get<0>(key) >= 0 ? std::get<1>(key) : 0;
    location.exact = exact;
    profile_.locations.push_back(location);
    location_sources_.push_back({std::get<0>(key), exact});
  }
  return it->second;
}

void ProfileBuilder::symbolize_locations() {
  // Modules used by a location become the profile's: the main executable
  // first, then in order of first use.
  std::vector<int32_t> profile_module(catalog_.size(), -1);
  auto first = std::find_if(location_sources_.begin(), location_sources_.end(), [&](const LocationSource& source) {
    return source.catalog_index >= 0 &&
           catalog_.module(static_cast<uint32_t>(source.catalog_index)).ref.path == main_executable_;
  });
  std::vector<size_t> order;
  if (first != location_sources_.end()) order.push_back(static_cast<size_t>(first - location_sources_.begin()));
  for (size_t i = 0; i < profile_.locations.size(); ++i) order.push_back(i);
  for (size_t i : order) {
    const LocationSource& source = location_sources_[i];
    if (source.catalog_index < 0) continue;
    auto index = static_cast<uint32_t>(source.catalog_index);
    if (profile_module[index] < 0) {
      const ModuleCatalog::Module& module = catalog_.module(index);
      ProfileModule out;
      out.path = module.ref.path;
      out.build_id = hex(module.ref.build_id);
      out.start = module.start;
      out.limit = module.limit;
      out.file_offset = module.file_offset;
      profile_module[index] = static_cast<int32_t>(profile_.modules.size());
      profile_.modules.push_back(out);
    }
    ProfileLocation& location = profile_.locations[i];
    location.module = profile_module[index];
    uint64_t offset = location.file_offset;
    if (!source.exact && offset > 0) --offset;  // the call instruction precedes the return address
    location.frames = catalog_.symbolizer().symbolize(catalog_.symbolizer_id(index), offset);
    if (!location.frames.empty()) profile_.modules[static_cast<size_t>(location.module)].symbolized = true;
  }
}

void ProfileBuilder::start_sites_at_allocator_callers() {
  // libstdc++'s operator new is left unprobed (exceptions cannot unwind
  // through a return probe), so its malloc call is what was recorded; the
  // site the user wants starts at operator new's caller.
  auto is_operator_new = [&](uint32_t index) {
    const std::vector<SourceFrame>& frames = profile_.locations[index].frames;
    return !frames.empty() && frames.back().function.starts_with("operator new");
  };
  std::map<std::tuple<std::vector<uint32_t>, StackOutcome, int32_t, int32_t>, size_t> merged;
  std::vector<ProfileSite> sites;
  for (ProfileSite& site : profile_.sites) {
    size_t leading = 0;
    while (leading < site.locations.size() && is_operator_new(site.locations[leading])) ++leading;
    site.locations.erase(site.locations.begin(), site.locations.begin() + static_cast<std::ptrdiff_t>(leading));
    auto [it, added] = merged.try_emplace({site.locations, site.outcome, site.pid, site.tid}, sites.size());
    if (added) {
      sites.push_back(std::move(site));
    } else {
      sites[it->second].costs.add(site.costs);
      sites[it->second].frame_pointer_fallback |= site.frame_pointer_fallback;
    }
  }
  profile_.sites = std::move(sites);
}

Profile ProfileBuilder::build() {
  costs_.finish();
  retry_missing_modules();
  profile_.peak_time_ns = costs_.peak_time_ns();

  // Call paths with the same locations and outcome (and thread, when split)
  // are one site.
  std::map<std::tuple<std::vector<uint32_t>, StackOutcome, int32_t, int32_t>, size_t> site_index;
  for (const auto& [cost_key, costs] : costs_.costs()) {
    ProfileSite site;
    uint64_t key = cost_key;
    if (options_.split_by_thread) std::tie(key, site.pid, site.tid) = thread_sites_[cost_key];
    site.outcome = StackOutcome::NoStack;
    const CallPath* path = nullptr;
    if (key >= kUnresolvedBase) {
      // Its Stack record came after it, or never.
      auto late = path_of_hash_.find(unresolved_hashes_[key - kUnresolvedBase]);
      if (late != path_of_hash_.end()) path = &paths_[late->second.path];
      else site.outcome = StackOutcome::Undefined;
    } else if (key != 0) {
      path = &paths_[key - 1];
    }
    if (path) {
      site.locations = path->locations;
      site.outcome = path->outcome;
      site.frame_pointer_fallback = path->frame_pointer_fallback;
    }
    auto [it, added] = site_index.try_emplace({site.locations, site.outcome, site.pid, site.tid}, profile_.sites.size());
    if (added) {
      site.costs = costs;
      profile_.sites.push_back(std::move(site));
    } else {
      profile_.sites[it->second].costs.add(costs);
      profile_.sites[it->second].frame_pointer_fallback |= site.frame_pointer_fallback;
    }
  }
  // The cost map's order changes from run to run (absl seeds its hash):
  // sites are put in the order of their paths, so ties rank the same way
  // every time.
  std::sort(profile_.sites.begin(), profile_.sites.end(), [](const ProfileSite& a, const ProfileSite& b) {
    return std::tie(a.locations, a.outcome, a.pid, a.tid) < std::tie(b.locations, b.outcome, b.pid, b.tid);
  });
  symbolize_locations();
  start_sites_at_allocator_callers();
  if (!options_.function.empty()) {
    std::erase_if(profile_.sites,
                  [&](const ProfileSite& site) { return !site_calls(profile_, site, options_.function); });
  }
  for (ProfileSite& site : profile_.sites) {
    if (site.costs.leaked_allocations > 0 && !options_.suppressions.empty() &&
        options_.suppressions.matches(profile_, site)) {
      profile_.suppressed_leaked_bytes += site.costs.leaked_bytes;
      profile_.suppressed_leaked_allocations += site.costs.leaked_allocations;
      site.costs.leaked_bytes = 0;
      site.costs.leaked_allocations = 0;
    } else if (site.costs.leaked_allocations > 0 && !options_.show_runtime_leaks &&
               is_runtime_allocation(profile_, site)) {
      profile_.runtime_leaked_bytes += site.costs.leaked_bytes;
      profile_.runtime_leaked_allocations += site.costs.leaked_allocations;
      site.costs.leaked_bytes = 0;
      site.costs.leaked_allocations = 0;
    }
    profile_.totals.add(site.costs);
    profile_.allocations_by_outcome[static_cast<size_t>(site.outcome)] += site.costs.allocations;
  }
  profile_.warnings = catalog_.warnings();
  if (retries_skipped_ > 0)
    profile_.warnings.push_back(fmt::format(
        "{} raw stack copies stopped at a file missing here were not unwound again with the artifact's Module "
        "records (more than {} MiB of copies): they stay missing-module",
        retries_skipped_, kMaxPendingBytes >> 20));
  return std::move(profile_);
}

}  // namespace memtrack
