#include "output/csv_output.h"

#include <fmt/format.h>

#include <string>

#include "output/output.h"

namespace memtrack {

extern const OutputFormat kCsvOutput{
    .name = "csv",
    .summary = "memory over time: heap, RSS and mapped bytes per time bucket, in total and per process (spreadsheets, plots)",
    .noun = "CSV file",
    .carries_notes = false,
    .write = [](const ReportModel& model, const OutputOptions&, std::ostream& sink) {
      write_timeline_csv(model.timeline ? *model.timeline : Timeline{}, sink);
    }};

void write_timeline_csv(const Timeline& timeline, std::ostream& out) {
  out << "pid,start_s,end_s";
  for (int s = 0; s < kSeriesCount; ++s) {
    const char* name = series_name(static_cast<Series>(s));
    out << ',' << name << "_min," << name << "_max," << name << "_last";
  }
  out << ",allocations,allocated_bytes\n";
  auto rows = [&](const ProcessTimeline& t, const std::string& scope) {
    for (const TimelineBucket& b : t.buckets) {
      out << scope << ',' << fmt::format("{:.9f},{:.9f}", b.start_ns / 1e9, (b.start_ns + t.bucket_ns) / 1e9);
      for (int s = 0; s < kSeriesCount; ++s) out << ',' << b.min[s] << ',' << b.max[s] << ',' << b.last[s];
      out << ',' << b.allocations << ',' << b.allocated_bytes << '\n';
    }
  };
  rows(timeline.total, "total");
  for (const ProcessTimeline& p : timeline.processes) rows(p, std::to_string(p.pid));
}

}  // namespace memtrack
