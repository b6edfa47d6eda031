#include "analyze/profile_builder.h"

#include <fmt/format.h>

#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <exception>
#include <thread>
#include <tuple>
#include <vector>

namespace memtrack {
namespace {

bool site_calls(const Profile& profile, const ProfileSite& site, const std::string& function) {
  for (uint32_t index : site.locations)
    for (const SourceFrame& frame : profile.locations[index].frames)
      if (frame.function.find(function) != std::string::npos) return true;
  return false;
}

// Sites by what makes them one: locations, outcome, process and thread.
// Hashed: tens of thousands of paths of ~40 locations each, which an ordered
// map compared element by element at every level.
using SiteIndex = absl::flat_hash_map<std::tuple<std::vector<uint32_t>, StackOutcome, int32_t, int32_t>, size_t>;

}  // namespace

ProfileBuilder::ProfileBuilder(ProfileOptions options)
    : options_(std::move(options)),
      catalog_(std::make_unique<ModuleCatalog>(options_.symbols)),
      sites_(options_.split_by_thread) {}

SiteId ProfileBuilder::on_event(const Event& event) {
  if (is_memory_record(event.type)) return 0;  // the timeline's (analyze/timeline.h)
  // Stacks are resolved as they come: an exited process's placements are
  // only needed for a Stack record that comes a little late, and for its raw
  // copies waiting for Module records.
  exited_.expire(event.timestamp, [&](int32_t pid) {
    if (retries_.holds(pid)) return;
    module_map_.forget(pid);
    mappings_changed();
  });
  switch (event.type) {
    case EventType::Mapping:
      if (main_executable_.empty() && event.mapping && event.mapping->new_image) main_executable_ = event.mapping->path;
      module_map_.on_event(event);
      mappings_changed();
      return 0;
    case EventType::Stack:
      if (event.stack) on_stack(event);
      return 0;
    case EventType::PythonCode:
      if (event.python_code) python_codes_.add(*event.python_code);
      return 0;
    case EventType::Fork:
      exited_.on_reuse(event.pid);
      module_map_.on_event(event);
      mappings_changed();
      return 0;
    case EventType::Exec:
      module_map_.on_event(event);
      mappings_changed();
      return 0;
    case EventType::Exit:
      module_map_.on_event(event);
      mappings_changed();
      exited_.on_exit(event.pid, event.timestamp);
      return 0;
    default:
      return is_allocation(event.type) ? allocation_site(event.stack_hash, event.pid, event.tid) : 0;
  }
}

void ProfileBuilder::on_module(const ModuleInfo& module) { catalog_->add_embedded(module); }

void ProfileBuilder::on_stack(const Event& stack_event) {
  const StackDefinition& definition = *stack_event.stack;
  if (sites_.defined(definition.hash)) return;
  CallPath path = call_path_of(resolver_.resolve(stack_event, module_map_, *catalog_), definition);
  ++definitions_by_outcome_[static_cast<size_t>(path.outcome)];
  uint32_t index = 0;
  if (path.outcome == StackOutcome::MissingModule && retries_.admit(stack_event)) {
    index = paths_.add_own(std::move(path));
    retries_.keep(stack_event, index);
  } else {
    index = paths_.intern(std::move(path));
  }
  sites_.define(definition.hash, index, !definition.bytes.empty() && definition.end != StackEnd::NotWalked);
}

CallPath ProfileBuilder::call_path_of(const ResolvedStack& stack, const StackDefinition& definition) {
  CallPath path;
  path.outcome = stack.outcome;
  path.frame_pointer_fallback = stack.frame_pointer_fallback;
  // Python frames, two words each (format/event.h), innermost first: each
  // goes before (inside) the native frame at its index; past the native
  // frames, at the end.
  const std::vector<uint64_t>& python = definition.python_frames;
  size_t next_python = 0;
  auto add_python_until = [&](uint64_t native_index) {
    for (; next_python + 1 < python.size() && (python[next_python + 1] >> 32) <= native_index; next_python += 2)
      path.locations.push_back(locations_.python(python[next_python], static_cast<uint32_t>(python[next_python + 1])));
  };
  const bool reuse = module_map_.unchanged_since(stack.pid, stack.timestamp);
  for (size_t i = 0; i < stack.return_addresses.size(); ++i) {
    add_python_until(i);
    uint64_t address = stack.return_addresses[i];
    bool exact = std::find(stack.exact_pcs.begin(), stack.exact_pcs.end(), i) != stack.exact_pcs.end();
    uint32_t location = frame_location(stack, address, exact, reuse);
    if (location != kLeftOut) path.locations.push_back(location);
  }
  add_python_until(UINT64_MAX);
  return path;
}

uint32_t ProfileBuilder::frame_location(const ResolvedStack& stack, uint64_t address, bool exact, bool reuse) {
  const std::pair<uint64_t, uint64_t> key{address, uint64_t{static_cast<uint32_t>(stack.pid)} << 1 | exact};
  if (reuse) {
    auto known = frame_locations_.find(key);
    if (known != frame_locations_.end()) return known->second;
  }
  const Placement* placement = placement_of(stack, address, exact);
  // The interposer's signal trampoline, between a handler and the signal
  // frame: the uprobe path's paths, recorded without it, are the same.
  const uint32_t location = placement && placement->mapping && is_interposer_library(placement->mapping->path)
                                ? kLeftOut
                                : location_of(placement, address, exact);
  if (reuse) frame_locations_.emplace(key, location);
  return location;
}

const Placement* ProfileBuilder::placement_of(const ResolvedStack& stack, uint64_t address, bool exact) const {
  uint64_t lookup = exact || address == 0 ? address : address - 1;
  return module_map_.placement_at(stack.pid, lookup, stack.timestamp);
}

uint32_t ProfileBuilder::location_of(const Placement* placement, uint64_t address, bool exact) {
  if (!placement || !placement->mapping) return locations_.unmapped(address, exact);
  uint32_t module = catalog_->index_of(placement->mapping, placement->start);
  return locations_.in_module(module, address - placement->start + placement->mapping->file_offset, address, exact);
}

void ProfileBuilder::retry_missing_modules() {
  for (const RawCopyRetries::Pending& pending : retries_.take()) {
    CallPath again = call_path_of(resolver_.resolve(pending.stack_event, module_map_, *catalog_), *pending.stack_event.stack);
    --definitions_by_outcome_[static_cast<size_t>(paths_[pending.path].outcome)];
    ++definitions_by_outcome_[static_cast<size_t>(again.outcome)];
    paths_.replace(pending.path, std::move(again));
  }
}

std::vector<ProfileSite> ProfileBuilder::sites_of(const std::vector<SiteCosts>& costs) const {
  // Call paths with the same locations and outcome (and thread, when split)
  // are one site.
  SiteIndex site_index;
  std::vector<ProfileSite> sites;
  for (size_t id = 0; id < costs.size(); ++id) {
    if (costs[id].allocations == 0) continue;  // no selected allocation
    ProfileSite site;
    StackSites::Resolved resolved = sites_.resolve(static_cast<SiteId>(id));
    site.outcome = resolved.outcome;
    site.pid = resolved.pid;
    site.tid = resolved.tid;
    if (resolved.path) {
      const CallPath& path = paths_[*resolved.path];
      site.locations = path.locations;
      site.outcome = path.outcome;
      site.frame_pointer_fallback = path.frame_pointer_fallback;
    }
    auto [it, added] = site_index.try_emplace({site.locations, site.outcome, site.pid, site.tid}, sites.size());
    if (added) {
      site.costs = costs[id];
      site.replay_sites.push_back(static_cast<uint32_t>(id));
      sites.push_back(std::move(site));
    } else {
      sites[it->second].costs.add(costs[id]);
      sites[it->second].frame_pointer_fallback |= site.frame_pointer_fallback;
      sites[it->second].replay_sites.push_back(static_cast<uint32_t>(id));
    }
  }
  // In the order of their paths, so ties rank the same way every time.
  std::sort(sites.begin(), sites.end(), [](const ProfileSite& a, const ProfileSite& b) {
    return std::tie(a.locations, a.outcome, a.pid, a.tid) < std::tie(b.locations, b.outcome, b.pid, b.tid);
  });
  return sites;
}

void ProfileBuilder::start_sites_at_allocator_callers(Profile& profile) {
  // libstdc++'s operator new is left unprobed (exceptions cannot unwind
  // through a return probe), so its malloc call is what was recorded; the
  // site the user wants starts at operator new's caller.
  auto is_operator_new = [&](uint32_t index) {
    const std::vector<SourceFrame>& frames = profile.locations[index].frames;
    return !frames.empty() && frames.back().function.starts_with("operator new");
  };
  SiteIndex merged;
  std::vector<ProfileSite> sites;
  for (ProfileSite& site : profile.sites) {
    size_t leading = 0;
    while (leading < site.locations.size() && is_operator_new(site.locations[leading])) ++leading;
    site.locations.erase(site.locations.begin(), site.locations.begin() + static_cast<std::ptrdiff_t>(leading));
    auto [it, added] = merged.try_emplace({site.locations, site.outcome, site.pid, site.tid}, sites.size());
    if (added) {
      sites.push_back(std::move(site));
    } else {
      sites[it->second].costs.add(site.costs);
      sites[it->second].frame_pointer_fallback |= site.frame_pointer_fallback;
      sites[it->second].replay_sites.insert(sites[it->second].replay_sites.end(), site.replay_sites.begin(),
                                            site.replay_sites.end());
    }
  }
  profile.sites = std::move(sites);
}

Profile ProfileBuilder::build(const HeapReplay& heap) {
  retry_missing_modules();
  Profile profile;
  profile.peak_time_ns = heap.site_peak_time_ns();
  profile.definitions_by_outcome = definitions_by_outcome_;
  {
    // Symbolizing (opening each module's symbols and debug information) and
    // merging call paths into sites touch nothing of each other's: on two
    // threads, as they are most of what is left after the read.
    std::exception_ptr failure;
    std::jthread symbolizing([&] {
      try {
        profile.modules = locations_.symbolize(*catalog_, main_executable_, python_codes_);
      } catch (...) {
        failure = std::current_exception();
      }
    });
    std::vector<ProfileSite> sites = sites_of(heap.site_costs());
    symbolizing.join();
    if (failure) std::rethrow_exception(failure);
    profile.sites = std::move(sites);
  }
  profile.locations = locations_.take();
  start_sites_at_allocator_callers(profile);
  if (!options_.function.empty()) {
    std::erase_if(profile.sites,
                  [&](const ProfileSite& site) { return !site_calls(profile, site, options_.function); });
  }
  for (ProfileSite& site : profile.sites) {
    if (site.costs.leaked_allocations > 0 && !options_.suppressions.empty() &&
        options_.suppressions.matches(profile, site)) {
      profile.suppressed_leaked_bytes += site.costs.leaked_bytes;
      profile.suppressed_leaked_allocations += site.costs.leaked_allocations;
      profile.suppressed_replay_sites.insert(profile.suppressed_replay_sites.end(), site.replay_sites.begin(),
                                             site.replay_sites.end());
      site.costs.leaked_bytes = 0;
      site.costs.leaked_allocations = 0;
    } else if (site.costs.leaked_allocations > 0 && !options_.show_runtime_leaks &&
               is_runtime_allocation(profile, site)) {
      profile.runtime_leaked_bytes += site.costs.leaked_bytes;
      profile.runtime_leaked_allocations += site.costs.leaked_allocations;
      profile.runtime_replay_sites.insert(profile.runtime_replay_sites.end(), site.replay_sites.begin(),
                                          site.replay_sites.end());
      site.costs.leaked_bytes = 0;
      site.costs.leaked_allocations = 0;
    }
    profile.totals.add(site.costs);
    profile.allocations_by_outcome[static_cast<size_t>(site.outcome)] += site.costs.allocations;
  }
  profile.warnings = catalog_->warnings();
  if (retries_.skipped() > 0)
    profile.warnings.push_back(fmt::format(
        "{} raw stack copies stopped at a file missing here were not unwound again with the artifact's Module "
        "records (more than {} MiB of copies): they stay missing-module",
        retries_.skipped(), RawCopyRetries::kMaxBytes >> 20));
  return profile;
}

}  // namespace memtrack
