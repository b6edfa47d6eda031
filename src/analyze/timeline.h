// Memory over time, per process and in total: live heap bytes (from the
// heap replay), RSS by member (Rss records), bytes the program mapped itself
// (Mmap/Munmap/Mremap/Brk records) and the allocation rate, in a bounded
// number of time buckets. A bucket keeps each series' minimum, maximum and
// last value, so downsampling never smooths a peak away; the exact peaks
// (value and time) are kept apart from the buckets. docs/REPORT.md, "timeline".
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analyze/report.h"
#include "format/event.h"

namespace memtrack {

// The series of a timeline. The program's RSS and mappings leave memtrack's
// own out (OwnMemory records): those are the last two series.
enum class Series : uint8_t { Heap, Rss, RssFile, RssAnon, RssShmem, RssSwap, Mapped, MemtrackRss, MemtrackMapped };
inline constexpr int kSeriesCount = 9;
// "heap", "rss", "rss_file", "rss_anon", "rss_shmem", "rss_swap", "mapped",
// "memtrack_rss", "memtrack_mapped".
const char* series_name(Series series);

struct TimelineBucket {
  uint64_t start_ns = 0;  // since the recording's start
  std::array<uint64_t, kSeriesCount> min{}, max{}, last{};
  uint64_t allocations = 0;      // allocation records in the bucket
  uint64_t allocated_bytes = 0;  // their sizes
};

struct SeriesPeak {
  uint64_t bytes = 0;
  std::optional<uint64_t> time_ns;  // first reached; nullopt when always 0
};

struct ProcessTimeline {
  int32_t pid = 0;  // 0: the total of every process
  uint64_t bucket_ns = 0;
  std::vector<TimelineBucket> buckets;  // consecutive, bucket_ns apart
  std::array<SeriesPeak, kSeriesCount> peaks;
  bool has_rss = false;     // Rss records were seen
  bool has_mapped = false;  // mapping records were seen
  bool has_own = false;     // OwnMemory records were seen (the fast path's interposer ran)

  // Peak RSS over heap peak (fragmentation, allocator overhead); nullopt
  // without both.
  std::optional<double> rss_to_heap() const;
};

// The allocations of one call site (a HeapReplay SiteId) per slice of the
// total's time: a slice is a whole number of the total's buckets, `slice_ns`
// wide from the window's start. Sparse and in slice order; a slice holding
// more than 2^32 allocations repeats its index.
struct SiteSlice {
  uint32_t slice = 0;
  uint32_t allocations = 0;
  uint64_t bytes = 0;
};
// Appends `slice` to a series in slice order, added into its last slice
// when it is the same one and the count stays below 2^32.
void append_site_slice(std::vector<SiteSlice>& series, const SiteSlice& slice);
struct SiteTimelines {
  uint64_t slice_ns = 0;
  std::vector<std::vector<SiteSlice>> by_site;  // by SiteId; empty when not asked for
};

struct Timeline {
  ProcessTimeline total;
  std::vector<ProcessTimeline> processes;  // in order of first appearance
  uint64_t from_ns = 0;                    // the window shown, since the recording's start
  std::optional<uint64_t> to_ns;
  // The selected allocations of each call site over time (TimelineOptions::
  // site_slices): what lets the HTML page filter its call paths by a window.
  SiteTimelines sites;
  bool has_memory_records() const { return total.has_rss || total.has_mapped; }
};

// Sets the peak RSS of the report's totals and processes (HeapFigures::
// peak_rss) from the timeline's, where Rss records were seen. A pid's
// incarnations are matched in order of appearance.
void set_peak_rss(Report& report, const Timeline& timeline);

// Slices of time of each call path's allocations a report keeps for the
// outputs that filter call paths by time (the HTML page's brushing).
inline constexpr size_t kReportSiteSlices = 256;

struct TimelineOptions {
  size_t max_points = 2000;          // buckets of the total
  size_t max_process_points = 500;   // buckets of each process
  uint64_t from_ns = 0;              // since the recording's start
  std::optional<uint64_t> to_ns;
  // At most this many slices of time for the per-site allocation counts
  // (Timeline::sites); 0: none are kept. Memory: 16 bytes per site and slice
  // it allocated in.
  size_t site_slices = 0;
};

class TimelineBuilder {
 public:
  TimelineBuilder(TimelineOptions options, uint64_t start_monotonic_ns);
  // Every event in stream order; `heap_live` is the event's process's live
  // heap bytes after the heap replay took the event; `selected_site`, for an
  // allocation the report's filters select, its call site (HeapReplay's
  // SiteId).
  void on_event(const Event& event, uint64_t heap_live, std::optional<uint32_t> selected_site = std::nullopt);
  // The buckets and peaks, and the per-site slices (moved out: call once).
  Timeline build();
  // The same so far, the builder left as it is (record --aggregate's
  // checkpoints): the slices are copied.
  Timeline build_now() const;

 private:
  struct Buckets {
    size_t max_points = 0;
    uint64_t width_ns = 1'000'000;  // doubles whenever the buckets would exceed max_points
    uint64_t origin_ns = 0;         // the window's start, since the recording's
    std::vector<TimelineBucket> buckets;
    std::array<SeriesPeak, kSeriesCount> peaks;
    std::array<uint64_t, kSeriesCount> carried{};  // the values before the first bucket
    // `changed`: a bit per series that may differ from the last update (the
    // others keep their value, so their minimum and maximum hold).
    // Returns the bucket of time_ns.
    TimelineBucket& update(uint64_t time_ns, const std::array<uint64_t, kSeriesCount>& values, uint32_t changed);
    // update() and count_allocation() for an event that set the heap series
    // alone (an allocation or a free, nearly every event), with its peak:
    // `allocated` is the allocation's size, nullopt for a free.
    void heap_point(uint64_t time_ns, uint64_t at_ns, const std::array<uint64_t, kSeriesCount>& values,
                    std::optional<uint64_t> allocated);
    TimelineBucket& at(uint64_t time_ns, const std::array<uint64_t, kSeriesCount>& values);
    void halve();
  };
  struct Process {
    int32_t pid = 0;
    std::array<uint64_t, kSeriesCount> values{};
    uint32_t changed = 0;  // a bit per series set since the last publish()
    std::map<uint64_t, uint64_t> mapped;  // the program's own mappings: start -> end
    std::array<uint64_t, kRssMemberCount> own_rss{};  // memtrack's resident bytes by RSS counter
    bool has_rss = false, has_mapped = false, has_own = false;
    Buckets buckets;
  };

  Process& process(int32_t pid);
  void set(Process& p, Series series, uint64_t value);
  void map_range(Process& p, uint64_t start, uint64_t end);
  void unmap_range(Process& p, uint64_t start, uint64_t end);
  void publish(Process& p, uint64_t time_ns);
  // on_event() for an allocation or a free.
  void on_heap_event(const Event& event, uint64_t time_ns, uint64_t heap_live, std::optional<uint32_t> selected_site);
  void count_site(uint32_t site, uint64_t in_window, uint64_t bytes);
  static void halve_site_slices(SiteTimelines& sites);
  // build()'s buckets and peaks, without the slices.
  Timeline series() const;

  TimelineOptions options_;
  uint64_t start_ns_;
  std::map<int32_t, size_t> running_;  // pid -> index in processes_
  // The process of the last event while it runs: most events follow one of
  // the same process (no lookup in running_ for those).
  size_t last_process_ = SIZE_MAX;
  std::vector<Process> processes_;
  std::array<uint64_t, kSeriesCount> totals_{};
  Buckets total_;
  bool total_rss_ = false, total_mapped_ = false, total_own_ = false;
  SiteTimelines sites_{.slice_ns = 1'000'000, .by_site = {}};
};

}  // namespace memtrack
