#include "output/speedscope_output.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <tuple>
#include <vector>

#include "analyze/call_tree.h"
#include "analyze/cost_kind.h"
#include "output/output.h"
#include "output/utf8.h"

namespace memtrack {
namespace {

using nlohmann::json;

class Frames {
 public:
  explicit Frames(const Profile& profile) : profile_(profile), of_location_(profile.locations.size()) {}

  // The frames of a site, root first.
  std::vector<size_t> stack_of(const ProfileSite& site) {
    std::vector<size_t> stack;
    if (site_is_truncated(site)) stack.push_back(index(kTruncatedLabel, "", 0, 0));
    if (site.locations.empty()) stack.push_back(index(std::string(stackless_label(site)), "", 0, 0));
    for (auto it = site.locations.rbegin(); it != site.locations.rend(); ++it) {
      if (*it >= profile_.locations.size())
        throw std::runtime_error("speedscope output: a site refers to location " + std::to_string(*it) + " of " +
                                 std::to_string(profile_.locations.size()));
      const std::vector<size_t>& frames = of_location(*it);
      stack.insert(stack.end(), frames.begin(), frames.end());
    }
    return stack;
  }

  json take() { return std::move(frames_); }

 private:
  // A location's inline levels, the containing function first.
  const std::vector<size_t>& of_location(uint32_t index_in_profile) {
    std::vector<size_t>& frames = of_location_[index_in_profile];
    if (!frames.empty()) return frames;
    const ProfileLocation& location = profile_.locations[index_in_profile];
    std::vector<std::string> names = frame_labels(profile_, location, FrameNaming::Function);
    for (size_t f = names.size(); f-- > 0;) {
      const SourceFrame* frame = f < location.frames.size() ? &location.frames[f] : nullptr;
      frames.push_back(index(names[f], frame ? frame->file : "", frame ? frame->line : 0, frame ? frame->column : 0));
    }
    return frames;
  }

  size_t index(const std::string& name, const std::string& file, uint32_t line, uint32_t column) {
    auto [it, added] = indexes_.try_emplace(std::tuple{name, file, line, column}, frames_.size());
    if (added) {
      json frame = {{"name", valid_utf8(name)}};
      if (!file.empty()) frame["file"] = valid_utf8(file);
      if (line != 0) frame["line"] = line;
      if (column != 0) frame["col"] = column;
      frames_.push_back(std::move(frame));
    }
    return it->second;
  }

  const Profile& profile_;
  std::vector<std::vector<size_t>> of_location_;
  std::map<std::tuple<std::string, std::string, uint32_t, uint32_t>, size_t> indexes_;
  json frames_ = json::array();
};

// The peak cost is what was live at `report --at T` when given.
std::string cost_title(CostKind kind, const Profile& profile) {
  switch (kind) {
    case CostKind::Bytes: return "allocated bytes";
    case CostKind::Count: return "allocations";
    case CostKind::Peak:
      return profile.live_at_ns ? fmt::format("bytes live at {:.9g} s", static_cast<double>(*profile.live_at_ns) / 1e9)
                                : "bytes live at the peak";
    case CostKind::Leaked: return "leaked bytes";
    case CostKind::LiveAtEnd: return "bytes live at the end of the recording";
    case CostKind::Temporary: return "temporary allocations";
  }
  return "?";  // not reached
}

}  // namespace

extern const OutputFormat kSpeedscopeOutput{
    .name = "speedscope",
    .summary = "a speedscope JSON file: one flame graph per process and cost, for speedscope.app",
    .noun = "speedscope file",
    .carries_notes = false,
    .sites_by_thread = true,  // grouped by process
    .write = [](const ReportModel& model, const OutputOptions&, std::ostream& sink) {
      write_speedscope(model.profile, sink, commands_by_pid(model.report));
    }};

void write_speedscope(const Profile& profile, std::ostream& out, const std::map<int32_t, std::string>& commands) {
  Frames frames(profile);
  std::map<int32_t, std::vector<const ProfileSite*>> sites_by_pid;  // pid 0: not split by process
  for (const ProfileSite& site : profile.sites) sites_by_pid[site.pid].push_back(&site);
  std::map<const ProfileSite*, std::vector<size_t>> stacks;
  for (const ProfileSite& site : profile.sites) stacks[&site] = frames.stack_of(site);

  std::vector<CostKind> kinds = {CostKind::Bytes, CostKind::Count, CostKind::Peak, CostKind::Leaked};
  if (profile.totals.live_at_end_allocations > 0) kinds.push_back(CostKind::LiveAtEnd);
  json profiles = json::array();
  for (const auto& [pid, sites] : sites_by_pid) {
    std::string process = "all processes";
    if (pid != 0) {
      process = "pid " + std::to_string(pid);
      if (auto command = commands.find(pid); command != commands.end() && !command->second.empty())
        process += ": " + command->second;
    }
    for (CostKind kind : kinds) {
      json samples = json::array(), weights = json::array();
      uint64_t total = 0;
      for (const ProfileSite* site : sites) {
        uint64_t weight = cost_of(site->costs, kind);
        if (weight == 0) continue;
        samples.push_back(stacks[site]);
        weights.push_back(weight);
        total += weight;
      }
      profiles.push_back({{"type", "sampled"},
                          {"name", valid_utf8(process + " - " + cost_title(kind, profile))},
                          {"unit", kind == CostKind::Count ? "none" : "bytes"},
                          {"startValue", 0},
                          {"endValue", total},
                          {"samples", std::move(samples)},
                          {"weights", std::move(weights)}});
    }
  }
  json file = {{"$schema", "https://www.speedscope.app/file-format-schema.json"},
               {"exporter", "memtrack"},
               {"name", valid_utf8(profile.command.empty() ? "memtrack" : "memtrack: " + profile.command)},
               {"activeProfileIndex", 0},
               {"shared", {{"frames", frames.take()}}},
               {"profiles", std::move(profiles)}};
  out << file.dump() << "\n";
  out.flush();
  if (!out) throw std::runtime_error("speedscope output: writing the file failed");
}

}  // namespace memtrack
