#include "analyze/profile_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace memtrack {
namespace {

std::string hex(const std::vector<uint8_t>& bytes) {
  std::string out;
  for (uint8_t b : bytes) out += fmt::format("{:02x}", b);
  return out;
}

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
  switch (event.type) {
    case EventType::Mapping:
      module_map_.on_event(event);
      return;
    case EventType::Stack:
      resolver_.on_stack(event);
      return;
    case EventType::Fork:
    case EventType::Exec:
    case EventType::Exit:
      module_map_.on_event(event);
      break;
    default:
      break;
  }
  costs_.on_event(event);
}

void ProfileBuilder::on_module(const ModuleInfo& module) { catalog_.add_embedded(module); }

uint32_t ProfileBuilder::location_of(const ResolvedStack& stack, uint64_t address) {
  // A return address: the call is the instruction before it, and the
  // placement is the one holding that call.
  uint64_t lookup = address > 0 ? address - 1 : 0;
  const Placement* placement = module_map_.placement_at(stack.pid, lookup, stack.timestamp);
  std::pair<int64_t, uint64_t> key{-1, address};
  if (placement && placement->mapping) {
    uint32_t module = catalog_.index_of(*placement->mapping, placement->start);
    key = {module, address - placement->start + placement->mapping->file_offset};
  }
  auto [it, added] = location_index_.try_emplace(key, static_cast<uint32_t>(profile_.locations.size()));
  if (added) {
    ProfileLocation location;
    location.address = address;
    location.file_offset = key.first >= 0 ? key.second : 0;
    profile_.locations.push_back(location);
    catalog_index_of_location_.push_back(key.first);
  }
  return it->second;
}

Profile ProfileBuilder::build() {
  costs_.finish();
  profile_.peak_time_ns = costs_.peak_time_ns();
  profile_.definitions_by_outcome = resolver_.definitions_by_outcome();

  // Stacks resolving to the same locations (and outcome) are one site.
  std::map<std::pair<std::vector<uint32_t>, StackOutcome>, size_t> site_index;
  const auto& stacks = resolver_.stacks();
  for (const auto& [hash, costs] : costs_.costs()) {
    ProfileSite site;
    site.outcome = StackOutcome::NoStack;
    if (hash != 0) {
      auto stack = stacks.find(hash);
      if (stack == stacks.end()) {
        site.outcome = StackOutcome::Undefined;
      } else {
        site.outcome = stack->second.outcome;
        site.frame_pointer_fallback = stack->second.frame_pointer_fallback;
        for (uint64_t address : stack->second.return_addresses)
          site.locations.push_back(location_of(stack->second, address));
      }
    }
    auto [it, added] = site_index.try_emplace({site.locations, site.outcome}, profile_.sites.size());
    if (added) {
      site.costs = costs;
      profile_.sites.push_back(std::move(site));
    } else {
      profile_.sites[it->second].costs.add(costs);
      profile_.sites[it->second].frame_pointer_fallback |= site.frame_pointer_fallback;
    }
  }

  // Modules used by a location become the profile's, in catalog order.
  std::vector<int32_t> profile_module(catalog_.size(), -1);
  for (size_t i = 0; i < profile_.locations.size(); ++i) {
    int64_t catalog_index = catalog_index_of_location_[i];
    if (catalog_index < 0) continue;
    auto index = static_cast<uint32_t>(catalog_index);
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
    Symbolizer& symbolizer = catalog_.symbolizer();
    Symbolizer::ModuleId id = catalog_.symbolizer_id(index);
    // The call instruction precedes the return address.
    location.frames = symbolizer.symbolize(id, location.file_offset > 0 ? location.file_offset - 1 : 0);
    if (!location.frames.empty()) profile_.modules[static_cast<size_t>(location.module)].symbolized = true;
  }

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
    }
    profile_.totals.add(site.costs);
    profile_.allocations_by_outcome[static_cast<size_t>(site.outcome)] += site.costs.allocations;
  }
  profile_.warnings = catalog_.warnings();
  return std::move(profile_);
}

}  // namespace memtrack
