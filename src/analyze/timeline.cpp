#include "analyze/timeline.h"

#include <algorithm>
#include <bit>
#include <iterator>
#include <utility>

#include "analyze/report.h"

namespace memtrack {

namespace {
constexpr std::array<const char*, kSeriesCount> kSeriesNames = {
    "heap", "rss", "rss_file", "rss_anon", "rss_shmem", "rss_swap", "mapped", "memtrack_rss", "memtrack_mapped"};

constexpr size_t index_of(Series s) { return static_cast<size_t>(s); }

std::optional<Series> member_series(int32_t member) {
  switch (member) {
    case static_cast<int32_t>(RssMember::File): return Series::RssFile;
    case static_cast<int32_t>(RssMember::Anon): return Series::RssAnon;
    case static_cast<int32_t>(RssMember::Shmem): return Series::RssShmem;
    case static_cast<int32_t>(RssMember::Swap): return Series::RssSwap;
    default: return std::nullopt;  // a counter of a newer kernel
  }
}
}  // namespace

const char* series_name(Series series) { return kSeriesNames[index_of(series)]; }

std::optional<double> ProcessTimeline::rss_to_heap() const {
  const SeriesPeak& rss = peaks[index_of(Series::Rss)];
  const SeriesPeak& heap = peaks[index_of(Series::Heap)];
  if (!has_rss || heap.bytes == 0) return std::nullopt;
  return static_cast<double>(rss.bytes) / static_cast<double>(heap.bytes);
}

TimelineBuilder::TimelineBuilder(TimelineOptions options, uint64_t start_monotonic_ns)
    : options_(options), start_ns_(start_monotonic_ns) {
  total_.max_points = std::max<size_t>(options_.max_points, 2);
  total_.origin_ns = options_.from_ns;
}

void TimelineBuilder::Buckets::halve() {
  std::vector<TimelineBucket> merged;
  merged.reserve((buckets.size() + 1) / 2);
  for (size_t i = 0; i < buckets.size(); i += 2) {
    TimelineBucket b = buckets[i];
    if (i + 1 < buckets.size()) {
      const TimelineBucket& next = buckets[i + 1];
      for (int s = 0; s < kSeriesCount; ++s) {
        b.min[s] = std::min(b.min[s], next.min[s]);
        b.max[s] = std::max(b.max[s], next.max[s]);
        b.last[s] = next.last[s];
      }
      b.allocations += next.allocations;
      b.allocated_bytes += next.allocated_bytes;
    }
    merged.push_back(b);
  }
  buckets = std::move(merged);
  width_ns *= 2;
}

// The bucket of `time_ns` (since the window's start), creating it and those
// before it, which hold `values` (the state before this change) throughout.
TimelineBucket& TimelineBuilder::Buckets::at(uint64_t time_ns, const std::array<uint64_t, kSeriesCount>& values) {
  // Almost every event falls in the latest bucket: no division for those.
  if (!buckets.empty() && time_ns >= buckets.back().start_ns && time_ns - buckets.back().start_ns < width_ns)
    return buckets.back();
  while (time_ns / width_ns >= max_points) halve();
  size_t index = time_ns / width_ns;
  if (buckets.empty()) {  // the state carried into the window counts from its start
    for (int s = 0; s < kSeriesCount; ++s)
      if (values[s] > peaks[s].bytes) peaks[s] = {values[s], origin_ns};
  }
  while (buckets.size() <= index) {
    TimelineBucket b;
    b.start_ns = buckets.size() * width_ns;
    b.min = b.max = b.last = buckets.empty() ? values : buckets.back().last;
    buckets.push_back(b);
  }
  return buckets[index];
}

TimelineBucket& TimelineBuilder::Buckets::update(uint64_t time_ns, const std::array<uint64_t, kSeriesCount>& values,
                                                 uint32_t changed) {
  if (buckets.empty()) changed = (1u << kSeriesCount) - 1;  // the first bucket starts from the carried state
  TimelineBucket& b = at(time_ns, buckets.empty() ? carried : buckets.back().last);
  for (uint32_t bits = changed; bits != 0; bits &= bits - 1) {
    const int s = std::countr_zero(bits);
    b.min[s] = std::min(b.min[s], values[s]);
    b.max[s] = std::max(b.max[s], values[s]);
    b.last[s] = values[s];
  }
  return b;
}

void TimelineBuilder::Buckets::heap_point(uint64_t time_ns, uint64_t at_ns,
                                          const std::array<uint64_t, kSeriesCount>& values,
                                          std::optional<uint64_t> allocated) {
  constexpr size_t heap = index_of(Series::Heap);
  const uint64_t value = values[heap];
  TimelineBucket* b = nullptr;
  if (!buckets.empty() && time_ns >= buckets.back().start_ns && time_ns - buckets.back().start_ns < width_ns) {
    b = &buckets.back();  // the latest bucket: no other series to carry in
    b->min[heap] = std::min(b->min[heap], value);
    b->max[heap] = std::max(b->max[heap], value);
    b->last[heap] = value;
  } else {
    b = &update(time_ns, values, 1u << heap);
  }
  if (value > peaks[heap].bytes) peaks[heap] = {value, at_ns};
  if (allocated) {
    ++b->allocations;
    b->allocated_bytes += *allocated;
  }
}

TimelineBuilder::Process& TimelineBuilder::process(int32_t pid) {
  if (last_process_ != SIZE_MAX && processes_[last_process_].pid == pid) return processes_[last_process_];
  auto it = running_.find(pid);
  if (it != running_.end()) {
    last_process_ = it->second;
    return processes_[it->second];
  }
  Process p;
  p.pid = pid;
  p.buckets.max_points = std::max<size_t>(options_.max_process_points, 2);
  p.buckets.origin_ns = options_.from_ns;
  running_[pid] = last_process_ = processes_.size();
  processes_.push_back(std::move(p));
  return processes_.back();
}

void TimelineBuilder::set(Process& p, Series series, uint64_t value) {
  size_t s = index_of(series);
  totals_[s] = totals_[s] - p.values[s] + value;
  p.values[s] = value;
  p.changed |= 1u << s;
}

void TimelineBuilder::map_range(Process& p, uint64_t start, uint64_t end) {
  if (start >= end) return;
  unmap_range(p, start, end);  // MAP_FIXED over one of its own mappings replaces it
  p.mapped[start] = end;
  set(p, Series::Mapped, p.values[index_of(Series::Mapped)] + (end - start));
}

void TimelineBuilder::unmap_range(Process& p, uint64_t start, uint64_t end) {
  if (start >= end) return;
  uint64_t removed = 0;
  auto it = p.mapped.upper_bound(start);
  if (it != p.mapped.begin()) --it;
  while (it != p.mapped.end() && it->first < end) {
    uint64_t s = it->first, e = it->second;
    if (e <= start) {
      ++it;
      continue;
    }
    it = p.mapped.erase(it);
    removed += std::min(e, end) - std::max(s, start);
    if (s < start) p.mapped[s] = start;
    if (e > end) it = p.mapped.emplace(end, e).first;
  }
  set(p, Series::Mapped, p.values[index_of(Series::Mapped)] - removed);
}

void TimelineBuilder::publish(Process& p, uint64_t time_ns) {
  // Before the window only the state moves; after it nothing is drawn.
  if (options_.to_ns && time_ns > *options_.to_ns) return;
  uint32_t changed = std::exchange(p.changed, 0);
  if (time_ns < options_.from_ns) {
    p.buckets.carried = p.values;
    total_.carried = totals_;
    return;
  }
  uint64_t in_window = time_ns - options_.from_ns;
  // Only the series this event set can move a bucket or a peak (an allocation
  // or a free sets the heap alone).
  auto track_peaks = [&](Buckets& b, const std::array<uint64_t, kSeriesCount>& values) {
    b.update(in_window, values, changed);
    for (uint32_t bits = changed; bits != 0; bits &= bits - 1) {
      const int s = std::countr_zero(bits);
      if (values[s] > b.peaks[s].bytes) b.peaks[s] = {values[s], time_ns};
    }
  };
  track_peaks(p.buckets, p.values);
  track_peaks(total_, totals_);
}

void TimelineBuilder::on_heap_event(const Event& event, uint64_t time_ns, uint64_t heap_live,
                                    std::optional<uint32_t> selected_site) {
  constexpr size_t heap = index_of(Series::Heap);
  Process& p = process(event.pid);
  totals_[heap] = totals_[heap] - p.values[heap] + heap_live;
  p.values[heap] = heap_live;
  if (time_ns < options_.from_ns) {  // the other series were carried at their own changes
    p.buckets.carried[heap] = heap_live;
    total_.carried[heap] = totals_[heap];
    return;
  }
  const uint64_t in_window = time_ns - options_.from_ns;
  std::optional<uint64_t> allocated;
  if (event.type != EventType::Free) allocated = event.size;
  p.buckets.heap_point(in_window, time_ns, p.values, allocated);
  total_.heap_point(in_window, time_ns, totals_, allocated);
  if (allocated && selected_site && options_.site_slices > 0) count_site(*selected_site, in_window, event.size);
}

void TimelineBuilder::on_event(const Event& event, uint64_t heap_live, std::optional<uint32_t> selected_site) {
  if (event.type == EventType::Mapping || event.type == EventType::Stack) return;
  uint64_t time_ns = ns_since(event.timestamp, start_ns_);
  if (options_.to_ns && time_ns > *options_.to_ns) return;
  if (is_heap_event(event.type)) {
    on_heap_event(event, time_ns, heap_live, selected_site);
    return;
  }
  Process& p = process(event.pid);
  set(p, Series::Heap, heap_live);
  switch (event.type) {
    case EventType::Rss: {
      std::optional<Series> series = member_series(event.member);
      if (!series) break;
      set(p, *series, event.size);
      auto v = [&](Series s) { return p.values[index_of(s)]; };
      set(p, Series::Rss, v(Series::RssFile) + v(Series::RssAnon) + v(Series::RssShmem));
      p.has_rss = total_rss_ = true;
      break;
    }
    case EventType::OwnMemory:
      if (event.member == kOwnMappedMember) {
        set(p, Series::MemtrackMapped, event.size);
      } else if (event.member >= 0 && event.member < kRssMemberCount) {
        p.own_rss[static_cast<size_t>(event.member)] = event.size;
        uint64_t own = 0;
        for (uint64_t bytes : p.own_rss) own += bytes;
        set(p, Series::MemtrackRss, own);
      }
      p.has_own = total_own_ = true;
      break;
    case EventType::Mmap: map_range(p, event.addr, event.addr + event.size); break;
    case EventType::Munmap: unmap_range(p, event.addr, event.addr + event.size); break;
    case EventType::Mremap: {
      // Only a mapping of its own moves with it (a file mapping stays out).
      uint64_t before = p.values[index_of(Series::Mapped)];
      unmap_range(p, event.old_addr, event.old_addr + event.old_size);
      if (p.values[index_of(Series::Mapped)] != before) map_range(p, event.addr, event.addr + event.size);
      break;
    }
    case EventType::Brk:
      if (event.addr > event.old_addr)
        map_range(p, event.old_addr, event.addr);
      else
        unmap_range(p, event.addr, event.old_addr);
      break;
    case EventType::Exec:
      p.mapped.clear();  // a new address space
      p.own_rss = {};
      set(p, Series::Mapped, 0);
      set(p, Series::MemtrackRss, 0);
      set(p, Series::MemtrackMapped, 0);
      break;
    case EventType::Exit:
      for (int s = 0; s < kSeriesCount; ++s) set(p, static_cast<Series>(s), 0);
      p.mapped.clear();
      p.own_rss = {};
      break;
    default: break;
  }
  if (event.type == EventType::Mmap || event.type == EventType::Munmap || event.type == EventType::Mremap ||
      event.type == EventType::Brk)
    p.has_mapped = total_mapped_ = true;
  publish(p, time_ns);
  if (event.type == EventType::Exit) {
    running_.erase(event.pid);
    last_process_ = SIZE_MAX;  // a later process may take its pid
  }
}

void append_site_slice(std::vector<SiteSlice>& series, const SiteSlice& slice) {
  if (!series.empty() && series.back().slice == slice.slice &&
      uint64_t{series.back().allocations} + slice.allocations <= UINT32_MAX) {
    series.back().allocations += slice.allocations;
    series.back().bytes += slice.bytes;
  } else {
    series.push_back(slice);
  }
}

void TimelineBuilder::halve_site_slices(SiteTimelines& sites) {
  for (std::vector<SiteSlice>& series : sites.by_site) {
    std::vector<SiteSlice> merged;
    merged.reserve(series.size());
    for (SiteSlice s : series) {
      s.slice /= 2;
      append_site_slice(merged, s);
    }
    series = std::move(merged);
  }
  sites.slice_ns *= 2;
}

void TimelineBuilder::count_site(uint32_t site, uint64_t in_window, uint64_t bytes) {
  // Slices stay whole buckets of the total, and at most site_slices of them.
  while (sites_.slice_ns < total_.width_ns || in_window / sites_.slice_ns >= options_.site_slices)
    halve_site_slices(sites_);
  auto slice = static_cast<uint32_t>(in_window / sites_.slice_ns);
  if (site >= sites_.by_site.size()) sites_.by_site.resize(site + 1);
  std::vector<SiteSlice>& series = sites_.by_site[site];
  // Events come in time order but for the slight interleaving of CPUs: the
  // slice is almost always the last one or a new one.
  auto at = series.end();
  if (!series.empty() && series.back().slice > slice)
    at = std::upper_bound(series.begin(), series.end(), slice,
                          [](uint32_t s, const SiteSlice& entry) { return s < entry.slice; });
  if (at != series.begin() && std::prev(at)->slice == slice && std::prev(at)->allocations < UINT32_MAX) {
    ++std::prev(at)->allocations;
    std::prev(at)->bytes += bytes;
  } else {
    series.insert(at, SiteSlice{slice, 1, bytes});
  }
}

Timeline TimelineBuilder::series() const {
  auto convert = [&](int32_t pid, const Buckets& b, bool has_rss, bool has_mapped, bool has_own) {
    ProcessTimeline t;
    t.pid = pid;
    t.bucket_ns = b.width_ns;
    t.buckets = b.buckets;
    for (TimelineBucket& bucket : t.buckets) bucket.start_ns += options_.from_ns;
    t.peaks = b.peaks;
    t.has_rss = has_rss;
    t.has_mapped = has_mapped;
    t.has_own = has_own;
    return t;
  };
  Timeline timeline;
  timeline.from_ns = options_.from_ns;
  timeline.to_ns = options_.to_ns;
  timeline.total = convert(0, total_, total_rss_, total_mapped_, total_own_);
  for (const Process& p : processes_)
    timeline.processes.push_back(convert(p.pid, p.buckets, p.has_rss, p.has_mapped, p.has_own));
  return timeline;
}

Timeline TimelineBuilder::build() {
  Timeline timeline = series();
  if (options_.site_slices > 0) {
    while (sites_.slice_ns < total_.width_ns) halve_site_slices(sites_);
    timeline.sites = std::move(sites_);
  }
  return timeline;
}

Timeline TimelineBuilder::build_now() const {
  Timeline timeline = series();
  if (options_.site_slices > 0) {
    timeline.sites = sites_;
    while (timeline.sites.slice_ns < total_.width_ns) halve_site_slices(timeline.sites);
  }
  return timeline;
}

void set_peak_rss(Report& report, const Timeline& timeline) {
  auto peak_rss = [](const ProcessTimeline& t) -> std::optional<uint64_t> {
    if (!t.has_rss) return std::nullopt;
    return t.peaks[static_cast<size_t>(Series::Rss)].bytes;
  };
  report.totals.peak_rss = peak_rss(timeline.total);
  std::map<int32_t, std::vector<const ProcessTimeline*>> incarnations;
  for (const ProcessTimeline& t : timeline.processes) incarnations[t.pid].push_back(&t);
  std::map<int32_t, size_t> seen;
  for (ProcessReport& process : report.processes) {
    auto it = incarnations.find(process.pid);
    size_t index = seen[process.pid]++;
    if (it != incarnations.end() && index < it->second.size()) process.figures.peak_rss = peak_rss(*it->second[index]);
  }
}

}  // namespace memtrack
