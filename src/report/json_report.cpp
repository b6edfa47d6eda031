#include "report/json_report.h"

#include <nlohmann/json.hpp>

namespace memtrack {

namespace {

using nlohmann::json;

template <typename T>
json or_null(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

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
      {"total_allocated", figures.total_allocated},
      {"average_allocation_size", figures.average_allocation_size()},
      {"peak_memory", figures.peak_memory},
      {"peak_time_ns", or_null(figures.peak_time_ns)},
      {"leaked_bytes", figures.leaked_bytes},
      {"leaked_count", figures.leaked_count},
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
  };
}

}  // namespace

void write_json_report(const Report& report, std::ostream& out) {
  json processes = json::array();
  for (const ProcessReport& process : report.processes) processes.push_back(process_json(process));
  json document = {
      {"format_version", kReportFormatVersion},
      {"header", header_json(report.header)},
      {"events", report.events},
      {"processes", std::move(processes)},
      {"totals", totals_json(report)},
      {"lost_events", or_null(report.lost_events)},
      {"counters", or_null(report.counters)},
      {"warnings", report.warnings},
  };
  // Command lines and paths are arbitrary bytes: replace invalid UTF-8
  // rather than throw.
  out << document.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
}

}  // namespace memtrack
