#include "output/json_output.h"
#include "output/json_values.h"
#include "output/recording_limits.h"
#include "output/timeline_json.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace memtrack {

extern const OutputFormat kJsonOutput{
    .name = "json",
    .summary = "the same as one JSON object, schema in docs/REPORT.md",
    .noun = "JSON report",
    .write = [](const ReportModel& model, const OutputOptions& options, std::ostream& sink) {
      ProfileView view = view_of(model, options);
      write_json_report(model.report, sink, &view);
    }};

namespace {

using nlohmann::json;

using json_values::or_null;

json histogram_json(const SizeHistogram& histogram) {
  json buckets = json::array();
  for (size_t i = 0; i < SizeHistogram::kBucketCount; ++i) {
    buckets.push_back({{"min", SizeHistogram::bucket_min(i)},
                       {"max", or_null(SizeHistogram::bucket_max(i))},
                       {"count", histogram.count(i)}});
  }
  return buckets;
}

// The keys shared by a process object and the totals object.
json figures_json(const HeapFigures& figures) {
  return {
      {"alloc_calls", figures.alloc_calls()},
      {"calls_by_kind",
       {{"malloc", figures.calls.malloc},
        {"calloc", figures.calls.calloc},
        {"realloc", figures.calls.realloc},
        {"aligned_alloc", figures.calls.aligned_alloc}}},
      {"realloc_calls", figures.calls.realloc},
      {"free_calls", figures.free_calls},
      {"unmatched_frees", figures.unmatched_frees},
      {"frees_of_earlier_blocks", figures.frees_of_earlier_blocks},
      {"total_allocated", figures.total_allocated},
      {"average_allocation_size", figures.average_allocation_size()},
      {"peak_memory", figures.peak_memory},
      {"peak_time_ns", or_null(figures.peak_time_ns)},
      {"leaked_bytes", figures.leaked_bytes},
      {"leaked_count", figures.leaked_count},
      {"runtime_held_bytes", figures.runtime_held_bytes},
      {"runtime_held_count", figures.runtime_held_count},
      {"suppressed_leaked_bytes", figures.suppressed_leaked_bytes},
      {"suppressed_leaked_count", figures.suppressed_leaked_count},
      {"live_at_end_bytes", figures.live_at_end_bytes},
      {"live_at_end_count", figures.live_at_end_count},
      {"inherited_unfreed_bytes", figures.inherited_unfreed_bytes},
      {"inherited_unfreed_count", figures.inherited_unfreed_count},
      {"temporary_allocations", figures.temporary_allocations},
      {"histogram", histogram_json(figures.histogram)},
      {"duration_ns", figures.duration_ns},
      {"threads", figures.threads},
  };
}

json process_json(const ProcessReport& process) {
  json object = figures_json(process.figures);
  object["pid"] = process.pid;
  object["parent_pid"] = or_null(process.parent_pid);
  object["command"] = process.command;
  object["exe"] = process.exe;
  object["start_time_ns"] = process.start_time_ns;
  object["exit_code"] = or_null(process.exit_code);
  object["running_at_end"] = process.running_at_end;
  object["recorded_by"] = recorded_by_name(process.recorded_by);
  return object;
}

std::string joined_command(const std::vector<std::string>& command) {
  std::string joined;
  for (const std::string& arg : command) {
    if (!joined.empty()) joined += ' ';
    joined += arg;
  }
  return joined;
}

json totals_json(const Report& report) {
  json object = figures_json(report.totals);
  object["pid"] = nullptr;
  object["parent_pid"] = nullptr;
  object["command"] = joined_command(report.header.command);
  object["exe"] = nullptr;
  object["start_time_ns"] = 0;
  object["exit_code"] = or_null(report.exit_status);
  object["running_at_end"] = nullptr;
  object["recorded_by"] = nullptr;
  return object;
}

json header_json(const ArtifactHeader& header) {
  return {
      {"artifact_format_version", header.format_version},
      {"recorder_version", header.recorder_version},
      {"features", header.features},
      {"command", header.command},
      {"host", header.host},
      {"kernel", header.kernel},
      {"clock", header.clock},
      {"start_monotonic_ns", header.start_monotonic_ns},
      {"start_realtime_ns", header.start_realtime_ns},
      {"page_size", header.page_size},
      {"kernel_fallbacks", header.kernel_fallbacks},
  };
}

json frames_json(const Profile& profile, const ProfileSite& site) {
  json frames = json::array();
  for (uint32_t index : site.locations) {
    const ProfileLocation& location = profile.locations[index];
    std::string module = location.python        ? "[python]"
                         : location.module >= 0 ? profile.modules[static_cast<size_t>(location.module)].path
                                                : "";
    std::string address = fmt::format("{:#x}", location.address);
    std::vector<std::string> labels = frame_labels(profile, location, FrameNaming::Function);
    std::vector<std::string> call_sites = frame_labels(profile, location, FrameNaming::CallSite);
    for (size_t i = 0; i < labels.size(); ++i) {
      const SourceFrame* frame = i < location.frames.size() ? &location.frames[i] : nullptr;
      json symbol_offset = frame && frame->symbol_offset ? json(*frame->symbol_offset) : json(nullptr);
      frames.push_back({{"function", labels[i]},
                        {"label", call_sites[i]},
                        {"symbol_offset", symbol_offset},
                        {"file", frame ? frame->file : ""},
                        {"line", frame ? frame->line : 0},
                        {"inlined", frame && frame->inlined},
                        {"module", module},
                        {"address", address}});
    }
  }
  return frames;
}

json tree_json(const CallTreeNode& node) {
  json children = json::array();
  for (const CallTreeNode& child : node.children) children.push_back(tree_json(child));
  return {{"label", node.label}, {"cost", node.cost}, {"children", std::move(children)}};
}

json profile_json(const ProfileView& view) {
  const Profile& profile = *view.profile;
  json definitions = json::object(), allocations = json::object();
  for (int i = 0; i < kStackOutcomeCount; ++i) {
    const char* name = stack_outcome_name(static_cast<StackOutcome>(i));
    definitions[name] = profile.definitions_by_outcome[i];
    allocations[name] = profile.allocations_by_outcome[i];
  }
  json sites = json::array();
  for (size_t index : ranked_sites(profile, view.by, view.top)) {
    const ProfileSite& site = profile.sites[index];
    sites.push_back({{"costs", json_values::site_costs(site.costs)},
                     {"allocating_function", allocating_function(profile, site)},
                     {"outcome", stack_outcome_name(site.outcome)},
                     {"frame_pointer_fallback", site.frame_pointer_fallback},
                     {"frames", frames_json(profile, site)}});
  }
  json functions = json::array();
  for (const FunctionGroup& group : group_by_allocating_function(profile, view.by, view.top))
    functions.push_back({{"function", group.function},
                         {"costs", json_values::site_costs(group.costs)},
                         {"call_paths", group.sites.size()}});
  json object = {
      {"by", cost_kind_name(view.by)},
      {"peak_time_ns", profile.peak_time_ns},
      {"live_at_ns", profile.live_at_ns ? json(*profile.live_at_ns) : json(nullptr)},
      {"totals", json_values::site_costs(profile.totals)},
      {"suppressed", {{"leaked_bytes", profile.suppressed_leaked_bytes},
                      {"leaked_allocations", profile.suppressed_leaked_allocations}}},
      {"stack_outcomes", {{"definitions", definitions}, {"allocations", allocations}}},
      {"sites_with_cost", ranked_sites(profile, view.by, 0).size()},
      {"sites", std::move(sites)},
      {"allocating_functions", std::move(functions)},
      {"runtime_leaks", {{"leaked_bytes", profile.runtime_leaked_bytes},
                         {"leaked_allocations", profile.runtime_leaked_allocations}}},
      {"filter_note", view.filter_note.empty() ? json(nullptr) : json(view.filter_note)},
      {"warnings", profile.warnings},
  };
  if (view.tree) {
    object["tree"] = tree_json(build_call_tree(profile, view.by, *view.tree));
    object["tree"]["direction"] = *view.tree == TreeDirection::TopDown ? "top-down" : "bottom-up";
  }
  return object;
}

json report_document(const Report& report, const ProfileView* view) {
  json processes = json::array();
  for (const ProcessReport& process : report.processes) processes.push_back(process_json(process));
  json document = {
      {"format_version", kReportFormatVersion},
      {"header", header_json(report.header)},
      {"events", report.events},
      {"attached", report.attached},
      {"recording_limits", recording_limits(report)},
      {"processes", std::move(processes)},
      {"totals", totals_json(report)},
      {"lost_events", or_null(report.lost_events)},
      {"counters", or_null(report.counters)},
      {"warnings", report.warnings},
  };
  if (view) document["profile"] = profile_json(*view);
  if (view && view->timeline) document["timeline"] = timeline_json(*view->timeline);
  return document;
}

}  // namespace

void write_json_report(const Report& report, std::ostream& out, const ProfileView* view) {
  // Command lines and paths are arbitrary bytes: replace invalid UTF-8
  // rather than throw.
  out << report_document(report, view).dump(2, ' ', false, json::error_handler_t::replace) << '\n';
}

std::string compact_json_report(const Report& report, const ProfileView* view) {
  return report_document(report, view).dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace memtrack
