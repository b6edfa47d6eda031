#include "analyze/heap_aggregate.h"

#include <fmt/format.h>

#include <algorithm>
#include <concepts>
#include <limits>
#include <msgpack/pack.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "format/msgpack_cursor.h"
#include "format/records.h"

namespace memtrack {
namespace {

// Bumped whenever the state's shape changes; readers refuse other versions.
constexpr uint64_t kStateVersion = 1;

// Each struct of the state lists its fields once, in order, for a visitor
// that packs them (Packing) or reads them back (Reading); the struct is an
// array of its fields, so a reader tells a foreign shape by its length.
template <typename V, typename T>
  requires std::same_as<std::remove_const_t<T>, CallsByKind>
void fields(V& v, T& x) {
  v(x.malloc), v(x.calloc), v(x.realloc), v(x.aligned_alloc);
}
template <typename V, typename T>
  requires std::same_as<std::remove_const_t<T>, HeapFigures>
void fields(V& v, T& x) {
  v(x.calls), v(x.free_calls), v(x.unmatched_frees), v(x.frees_of_earlier_blocks), v(x.total_allocated);
  v(x.peak_memory), v(x.peak_time_ns), v(x.leaked_bytes), v(x.leaked_count), v(x.runtime_held_bytes);
  v(x.runtime_held_count), v(x.suppressed_leaked_bytes), v(x.suppressed_leaked_count), v(x.live_at_end_bytes);
  v(x.live_at_end_count), v(x.inherited_unfreed_bytes), v(x.inherited_unfreed_count), v(x.temporary_allocations);
  v(x.histogram), v(x.duration_ns), v(x.threads), v(x.peak_rss);
}
template <typename V, typename T>
  requires std::same_as<std::remove_const_t<T>, SiteCosts>
void fields(V& v, T& x) {
  v(x.allocations), v(x.allocated_bytes), v(x.peak_bytes), v(x.peak_allocations), v(x.leaked_bytes);
  v(x.leaked_allocations), v(x.live_at_end_bytes), v(x.live_at_end_allocations), v(x.temporary_allocations);
  v(x.temporary_bytes);
}
template <typename V, typename T>
  requires std::same_as<std::remove_const_t<T>, HeapReplay::SiteTally>
void fields(V& v, T& x) {
  v(x.site), v(x.bytes), v(x.count);
}
template <typename V, typename T>
  requires std::same_as<std::remove_const_t<T>, HeapReplay::ProcessSummary>
void fields(V& v, T& x) {
  v(x.pid), v(x.parent_pid), v(x.command), v(x.exe), v(x.birth_ns), v(x.last_event_ns), v(x.exit_code);
  v(x.ended), v(x.image_interposed), v(x.earlier_images_recorded_by), v(x.figures), v(x.leaked_by_site);
}
template <typename V, typename T>
  requires std::same_as<std::remove_const_t<T>, HeapReplay::Summary>
void fields(V& v, T& x) {
  v(x.events), v(x.last_event_ns), v(x.total_peak_bytes), v(x.total_peak_ns), v(x.site_peak_bytes);
  v(x.site_peak_ns), v(x.site_costs), v(x.processes);
}
template <typename V, typename T>
  requires std::same_as<std::remove_const_t<T>, TimelineBucket>
void fields(V& v, T& x) {
  v(x.start_ns), v(x.min), v(x.max), v(x.last), v(x.allocations), v(x.allocated_bytes);
}
template <typename V, typename T>
  requires std::same_as<std::remove_const_t<T>, SeriesPeak>
void fields(V& v, T& x) {
  v(x.bytes), v(x.time_ns);
}
template <typename V, typename T>
  requires std::same_as<std::remove_const_t<T>, ProcessTimeline>
void fields(V& v, T& x) {
  v(x.pid), v(x.bucket_ns), v(x.buckets), v(x.peaks), v(x.has_rss), v(x.has_mapped), v(x.has_own);
}
template <typename V, typename T>
  requires std::same_as<std::remove_const_t<T>, SiteSlice>
void fields(V& v, T& x) {
  v(x.slice), v(x.allocations), v(x.bytes);
}
template <typename V, typename T>
  requires std::same_as<std::remove_const_t<T>, SiteTimelines>
void fields(V& v, T& x) {
  v(x.slice_ns), v(x.by_site);
}
template <typename V, typename T>
  requires std::same_as<std::remove_const_t<T>, Timeline>
void fields(V& v, T& x) {
  v(x.total), v(x.processes), v(x.from_ns), v(x.to_ns), v(x.sites);
}
template <typename V, typename T>
  requires std::same_as<std::remove_const_t<T>, AggregateSite>
void fields(V& v, T& x) {
  v(x.stack_hash), v(x.pid), v(x.tid);
}

// A field added to one of these structs must be listed in its fields() (and
// the version bumped): these sizes on x86-64, as of version 1, say when one was.
#if defined(__x86_64__)
static_assert(sizeof(HeapFigures) == 440, "HeapFigures changed: update fields() and kStateVersion");
static_assert(sizeof(SiteCosts) == 80, "SiteCosts changed: update fields() and kStateVersion");
static_assert(sizeof(HeapReplay::ProcessSummary) == 576, "ProcessSummary changed: update fields() and kStateVersion");
static_assert(sizeof(HeapReplay::Summary) == 96, "Summary changed: update fields() and kStateVersion");
static_assert(sizeof(TimelineBucket) == 240, "TimelineBucket changed: update fields() and kStateVersion");
static_assert(sizeof(ProcessTimeline) == 264, "ProcessTimeline changed: update fields() and kStateVersion");
static_assert(sizeof(Timeline) == 344, "Timeline changed: update fields() and kStateVersion");
#endif

template <typename T>
size_t field_count() {
  static const size_t count = [] {
    size_t fields_seen = 0;
    auto counter = [&](const auto&) { ++fields_seen; };
    const T probe{};
    fields(counter, probe);
    return fields_seen;
  }();
  return count;
}

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};
template <typename T>
struct IsArray : std::false_type {};
template <typename T, size_t N>
struct IsArray<std::array<T, N>> : std::true_type {};

struct Packing {
  msgpack::packer<records::ByteBuffer>& out;

  template <typename T>
  void operator()(const T& value) {
    if constexpr (std::is_same_v<T, bool>) {
      value ? out.pack_true() : out.pack_false();
    } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      out.pack_int64(value);
    } else if constexpr (std::is_integral_v<T>) {
      out.pack_uint64(value);
    } else if constexpr (std::is_same_v<T, std::string>) {
      out.pack_str(static_cast<uint32_t>(value.size()));
      out.pack_str_body(value.data(), static_cast<uint32_t>(value.size()));
    } else if constexpr (IsOptional<T>::value) {  // [] or [value]
      out.pack_array(value ? 1 : 0);
      if (value) (*this)(*value);
    } else if constexpr (IsVector<T>::value || IsArray<T>::value) {
      out.pack_array(static_cast<uint32_t>(value.size()));
      for (const auto& item : value) (*this)(item);
    } else if constexpr (std::is_same_v<T, SizeHistogram>) {
      out.pack_array(SizeHistogram::kBucketCount);
      for (size_t bucket = 0; bucket < SizeHistogram::kBucketCount; ++bucket) out.pack_uint64(value.count(bucket));
    } else {
      out.pack_array(static_cast<uint32_t>(field_count<T>()));
      fields(*this, value);
    }
  }
};

struct Reading {
  msgpack_cursor::Cursor& in;

  // An array's length, checked against what the reader expects (nullopt:
  // any, bounded by the bytes left: every element takes at least one).
  uint32_t array(std::optional<size_t> expected, const char* what) {
    uint32_t length = in.read_array_header();
    if (expected && length != *expected)
      throw std::runtime_error(fmt::format("{} has {} fields, not {}", what, length, *expected));
    if (length > in.remaining()) throw std::runtime_error(fmt::format("{} claims {} elements", what, length));
    return length;
  }

  template <typename T>
  void operator()(T& value) {
    if constexpr (std::is_same_v<T, bool>) {
      value = in.read_bool();
    } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      value = in.read_int<T>();
    } else if constexpr (std::is_integral_v<T>) {
      uint64_t read = in.read_uint();
      if (read > std::numeric_limits<T>::max()) throw std::runtime_error(fmt::format("{} is out of range", read));
      value = static_cast<T>(read);
    } else if constexpr (std::is_same_v<T, std::string>) {
      value = in.read_str();
    } else if constexpr (IsOptional<T>::value) {
      uint32_t present = array(std::nullopt, "an optional value");
      if (present > 1) throw std::runtime_error("an optional value holds more than one");
      value.reset();
      if (present) (*this)(value.emplace());
    } else if constexpr (IsVector<T>::value) {
      // Grown as elements are read: a length claimed by a malformed state
      // costs no more memory than the bytes that follow it.
      const uint32_t length = array(std::nullopt, "a list");
      value.clear();
      for (uint32_t i = 0; i < length; ++i) (*this)(value.emplace_back());
    } else if constexpr (IsArray<T>::value) {
      array(value.size(), "a fixed list");
      for (auto& item : value) (*this)(item);
    } else if constexpr (std::is_same_v<T, SizeHistogram>) {
      array(SizeHistogram::kBucketCount, "a size histogram");
      value = SizeHistogram{};
      for (size_t bucket = 0; bucket < SizeHistogram::kBucketCount; ++bucket) value.add_count(bucket, in.read_uint());
    } else {
      array(field_count<T>(), "a record of the state");
      fields(*this, value);
    }
  }
};

// The slices of sites renamed alike, in slice order, equal slices merged as
// the timeline merges them.
std::vector<SiteSlice> merged_slices(std::vector<SiteSlice> slices) {
  std::stable_sort(slices.begin(), slices.end(),
                   [](const SiteSlice& a, const SiteSlice& b) { return a.slice < b.slice; });
  std::vector<SiteSlice> merged;
  for (const SiteSlice& s : slices) append_site_slice(merged, s);
  return merged;
}

// The whole recording, at the report's resolution (recording_analysis).
TimelineOptions aggregate_timeline_options() {
  TimelineOptions options;
  options.site_slices = kReportSiteSlices;
  return options;
}

// What the outputs rely on and a malformed state could break: sites it
// lists, buckets of a width, slices in order within the report's count.
void check_restored(const HeapReplay::Summary& summary, const Timeline& timeline, size_t sites) {
  auto fail = [](const char* what) {
    throw std::runtime_error(fmt::format("the Aggregate records' state is inconsistent: {}", what));
  };
  if (summary.site_costs.size() > sites || timeline.sites.by_site.size() > sites) fail("it names sites it does not list");
  for (const HeapReplay::ProcessSummary& process : summary.processes)
    for (const HeapReplay::SiteTally& leaked : process.leaked_by_site)
      if (leaked.site >= sites) fail("a leak names a site it does not list");
  auto check_series = [&](const ProcessTimeline& series) {
    if (!series.buckets.empty() && series.bucket_ns == 0) fail("a timeline's buckets have no width");
  };
  check_series(timeline.total);
  for (const ProcessTimeline& process : timeline.processes) check_series(process);
  for (const std::vector<SiteSlice>& slices : timeline.sites.by_site) {
    if (!slices.empty() && timeline.sites.slice_ns == 0) fail("a site's slices of time have no width");
    for (size_t i = 0; i < slices.size(); ++i)
      if (slices[i].slice >= kReportSiteSlices || (i > 0 && slices[i].slice < slices[i - 1].slice))
        fail("a site's slices of time are out of order or range");
  }
}

}  // namespace

HeapAggregator::HeapAggregator(uint64_t start_monotonic_ns, bool attached)
    : replay_({}, start_monotonic_ns, std::nullopt, attached),
      timeline_(aggregate_timeline_options(), start_monotonic_ns) {}

SiteId HeapAggregator::site_of(const Event& allocation) {
  AggregateSite key{allocation.stack_hash, allocation.pid, allocation.tid};
  auto [it, added] = site_ids_.try_emplace(key, static_cast<SiteId>(sites_.size() + 1));
  if (added) sites_.push_back(key);
  return it->second;
}

void HeapAggregator::add(const Event& event) {
  // What analyze_recording hands the replay and the timeline.
  if (event.type == EventType::Mapping || event.type == EventType::Stack) return;
  const bool allocation = is_allocation(event.type);
  const SiteId site = allocation ? site_of(event) : 0;
  replay_.on_event(event, site);
  timeline_.on_event(event, replay_.live_bytes_of(event.pid),
                     allocation ? std::optional<uint32_t>(site) : std::nullopt);
}

std::vector<uint8_t> HeapAggregator::state() const {
  records::ByteBuffer bytes;
  msgpack::packer<records::ByteBuffer> packer(bytes);
  Packing pack{packer};
  packer.pack_array(4);
  pack(kStateVersion);
  pack(sites_);
  pack(replay_.summary_if_ended_now());
  pack(timeline_.build_now());
  return std::vector<uint8_t>(bytes.data(), bytes.data() + bytes.size());
}

AggregatedFigures restore_aggregate(std::span<const uint8_t> state, const AllocationSite& site_of,
                                    uint64_t start_monotonic_ns, bool attached) {
  msgpack_cursor::Cursor in(state.data(), state.data() + state.size());
  std::vector<AggregateSite> sites;
  HeapReplay::Summary summary;
  Timeline timeline;
  try {
    Reading read{in};
    read.array(4, "the aggregated state");
    uint64_t version = in.read_uint();
    if (version != kStateVersion)
      throw std::runtime_error(fmt::format("its version is {}; this memtrack reads version {}", version, kStateVersion));
    read(sites);
    read(summary);
    read(timeline);
    if (!in.at_end()) throw std::runtime_error("bytes follow the state");
  } catch (const std::runtime_error& e) {  // msgpack_cursor::DecodeError too
    throw std::runtime_error(fmt::format("the Aggregate records' state is malformed at byte {}: {}",
                                         in.position() - state.data(), e.what()));
  }
  // In order of first allocation, so the analysis numbers its sites as it
  // would have while reading the allocations.
  std::vector<SiteId> site_map(sites.size() + 1, 0);
  for (size_t i = 0; i < sites.size(); ++i) site_map[i + 1] = site_of(sites[i].stack_hash, sites[i].pid, sites[i].tid);
  check_restored(summary, timeline, site_map.size());

  std::vector<std::vector<SiteSlice>> by_site;
  std::vector<bool> merged_from_several;
  for (SiteId site = 0; site < timeline.sites.by_site.size(); ++site) {
    std::vector<SiteSlice>& slices = timeline.sites.by_site[site];
    if (slices.empty()) continue;
    SiteId renamed = site_map[site];
    if (renamed >= by_site.size()) {
      by_site.resize(renamed + 1);
      merged_from_several.resize(renamed + 1);
    }
    if (!by_site[renamed].empty()) merged_from_several[renamed] = true;
    by_site[renamed].insert(by_site[renamed].end(), slices.begin(), slices.end());
  }
  for (SiteId site = 0; site < by_site.size(); ++site)
    if (merged_from_several[site]) by_site[site] = merged_slices(std::move(by_site[site]));
  timeline.sites.by_site = std::move(by_site);
  return {HeapReplay::from_summary(summary, site_map, start_monotonic_ns, attached), std::move(timeline)};
}

}  // namespace memtrack
