#include "output/timeline_json.h"

#include <string>

namespace memtrack {
namespace {

using nlohmann::json;

json process_timeline_json(const ProcessTimeline& t) {
  json peaks = json::object();
  for (int s = 0; s < kSeriesCount; ++s) {
    const SeriesPeak& peak = t.peaks[s];
    peaks[series_name(static_cast<Series>(s))] = {{"bytes", peak.bytes},
                                                  {"time_ns", peak.time_ns ? json(*peak.time_ns) : json(nullptr)}};
  }
  json columns = json::object();
  std::vector<uint64_t> starts, allocations, allocated;
  for (const TimelineBucket& b : t.buckets) {
    starts.push_back(b.start_ns);
    allocations.push_back(b.allocations);
    allocated.push_back(b.allocated_bytes);
  }
  columns["start_ns"] = starts;
  for (int s = 0; s < kSeriesCount; ++s) {
    std::vector<uint64_t> min, max, last;
    for (const TimelineBucket& b : t.buckets) {
      min.push_back(b.min[s]);
      max.push_back(b.max[s]);
      last.push_back(b.last[s]);
    }
    std::string name = series_name(static_cast<Series>(s));
    columns[name + "_min"] = min;
    columns[name + "_max"] = max;
    columns[name + "_last"] = last;
  }
  columns["allocations"] = allocations;
  columns["allocated_bytes"] = allocated;
  std::optional<double> ratio = t.rss_to_heap();
  return {{"pid", t.pid},
          {"bucket_ns", t.bucket_ns},
          {"has_rss", t.has_rss},
          {"has_mapped", t.has_mapped},
          {"has_own", t.has_own},
          {"peaks", std::move(peaks)},
          {"rss_to_heap", ratio ? json(*ratio) : json(nullptr)},
          {"buckets", std::move(columns)}};
}

}  // namespace

json timeline_json(const Timeline& timeline) {
  json series = json::array();
  for (int s = 0; s < kSeriesCount; ++s) series.push_back(series_name(static_cast<Series>(s)));
  json processes = json::array();
  for (const ProcessTimeline& p : timeline.processes)
    if (!p.buckets.empty()) processes.push_back(process_timeline_json(p));
  return {{"from_ns", timeline.from_ns},
          {"to_ns", timeline.to_ns ? json(*timeline.to_ns) : json(nullptr)},
          {"series", std::move(series)},
          {"total", process_timeline_json(timeline.total)},
          {"processes", std::move(processes)}};
}

}  // namespace memtrack
