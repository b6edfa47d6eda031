#include "analyze/recording_analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <thread>
#include <utility>

#include "analyze/heap_aggregate.h"
#include "analyze/heap_replay.h"
#include "analyze/python_codes.h"
#include "analyze/profile_builder.h"
#include "format/artifact.h"
#include "module/module_artifacts.h"
#include "util/bounded_queue.h"

namespace memtrack {
namespace {

constexpr uint64_t kProgressEvery = 1 << 20;
constexpr size_t kBatchEvents = 1 << 12;
constexpr size_t kQueuedBatches = 8;  // bounds memory to a few MB of events
constexpr size_t kSpareBatches = 2;   // consumed batches kept for the reader to refill

// An event as the analysis thread takes it: an allocation or a free in a
// third of an Event's 144 bytes, or the place of another event. The batches
// cross from one core to the other, and moving whole Events cost more than
// decoding them (each cache line written on one core is missed on the other).
struct Item {
  static constexpr uint8_t kOther = 0xff;  // `type`: the next of Batch::others

  uint64_t timestamp = 0;
  uint64_t addr = 0;
  uint64_t size = 0;
  uint64_t old_addr = 0;
  int32_t pid = 0;
  int32_t tid = 0;
  SiteId site = 0;  // the profile builder's, named on the reader's thread
  uint8_t type = kOther;
};

// What the reader hands the consumer: events in file order.
struct Batch {
  std::vector<Item> items;
  std::vector<Event> others;  // the events that are not allocations or frees, in order

  void add(const Event& e, SiteId site) {
    if (!is_heap_event(e.type)) {
      items.push_back(Item{});
      others.push_back(e);
      return;
    }
    items.push_back(Item{.timestamp = e.timestamp,
                         .addr = e.addr,
                         .size = e.size,
                         .old_addr = e.old_addr,
                         .pid = e.pid,
                         .tid = e.tid,
                         .site = site,
                         .type = static_cast<uint8_t>(e.type)});
  }
  // f(event, site) for each, in order.
  template <typename F>
  void for_each(F&& f) const {
    Event heap;  // the fields of an allocation or free, set from each item
    size_t next_other = 0;
    for (const Item& item : items) {
      if (item.type == Item::kOther) {
        f(others[next_other++], SiteId{0});
        continue;
      }
      heap.type = static_cast<EventType>(item.type);
      heap.timestamp = item.timestamp;
      heap.addr = item.addr;
      heap.size = item.size;
      heap.old_addr = item.old_addr;
      heap.pid = item.pid;
      heap.tid = item.tid;
      f(heap, item.site);
    }
  }
  void clear() {
    items.clear();  // keeps the capacity
    others.clear();
  }
};

// The heap replay and the timeline on a thread of their own, fed batches
// through a bounded queue, so that the work shares two cores: the reader's
// thread decodes and names each allocation's call site (the profile builder,
// which resolves every new call path), this one counts it per process and per
// site and draws memory over time.
class Consumer {
 public:
  explicit Consumer(std::function<void(const Batch&)> consume)
      : consume_(std::move(consume)), thread_([this] { run(); }) {}
  // Without finish() (the reader threw): stops after the queued batches.
  ~Consumer() { stop(); }

  // An empty batch to fill: one the consumer is done with when there is one,
  // so that the reader refills memory already touched instead of paging in
  // megabytes of new events for every batch.
  std::unique_ptr<Batch> empty_batch() {
    {
      std::lock_guard lock(spare_mutex_);
      if (!spare_.empty()) {
        std::unique_ptr<Batch> batch = std::move(spare_.back());
        spare_.pop_back();
        return batch;
      }
    }
    auto batch = std::make_unique<Batch>();
    batch->items.reserve(kBatchEvents);
    return batch;
  }
  // Refused once the consumer failed: finish() reports it.
  void push(std::unique_ptr<Batch> batch) { batches_.push(std::move(batch)); }
  // Waits for every batch to be consumed; rethrows what the consumer threw.
  void finish() {
    stop();
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  }

 private:
  void stop() {
    batches_.close();
    if (thread_.joinable()) thread_.join();
  }

  void run() {
    while (std::optional<std::unique_ptr<Batch>> batch = batches_.pop()) {
      try {
        consume_(**batch);
      } catch (...) {
        failure_ = std::current_exception();  // read after the join
        batches_.shutdown();
        return;
      }
      (*batch)->clear();
      std::lock_guard lock(spare_mutex_);
      if (spare_.size() < kSpareBatches) spare_.push_back(std::move(*batch));
    }
  }

  std::function<void(const Batch&)> consume_;
  BoundedQueue<std::unique_ptr<Batch>> batches_{kQueuedBatches};
  std::mutex spare_mutex_;
  std::vector<std::unique_ptr<Batch>> spare_;
  std::exception_ptr failure_;
  std::thread thread_;
};

uint64_t seconds_to_ns(double seconds, const char* option) {
  if (!(seconds >= 0) || !std::isfinite(seconds))
    throw std::runtime_error(fmt::format("{} {}: must be seconds >= 0", option, seconds));
  // Beyond 2^64 ns (585 years) the conversion would be undefined: the end of time.
  // Rounded: 1.001 * 1e9 is 1000999999.9999999 in binary floating point.
  double ns = std::round(seconds * 1e9);
  return ns >= 0x1p64 ? UINT64_MAX : static_cast<uint64_t>(ns);
}

bool aggregated(const ArtifactHeader& header) {
  return std::find(header.features.begin(), header.features.end(), kAggregatedFeature) != header.features.end();
}

// An aggregated recording keeps figures, not the events a filter or a moment
// would pick from.
void refuse_event_options(const AnalysisOptions& options) {
  const char* option = !options.pids.empty() ? "--pid"
                       : !options.tids.empty() ? "--tid"
                       : options.from_s        ? "--from"
                       : options.to_s          ? "--to"
                       : options.at_s          ? "--at"
                                               : nullptr;
  if (option)
    throw std::runtime_error(fmt::format("{}: {} needs the recording's events, and an aggregated recording (record "
                                         "--aggregate) keeps their figures only: record without --aggregate",
                                         options.file, option));
}

// The Aggregate records' parts, joined as they come (in order, each frame
// holding one).
class AggregateState {
 public:
  void add(const AggregatePart& part) {
    if (part.part != next_ || (next_ > 0 && part.parts != parts_)) {
      problem_ = fmt::format("Aggregate record {} of {} came where record {} of {} was expected", part.part + 1,
                             part.parts, next_ + 1, next_ == 0 ? part.parts : parts_);
      return;
    }
    parts_ = part.parts;
    ++next_;
    bytes_.insert(bytes_.end(), part.state.begin(), part.state.end());
  }
  // The state, or why there is none.
  std::optional<std::string> missing() const {
    if (problem_) return problem_;
    if (next_ == 0) return "no Aggregate records: the recording ended before memtrack wrote its figures";
    if (next_ < parts_) return fmt::format("only {} of its {} Aggregate records", next_, parts_);
    return std::nullopt;
  }
  std::span<const uint8_t> bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
  uint32_t next_ = 0;
  uint32_t parts_ = 0;
  std::optional<std::string> problem_;
};

// A recording that ended before writing its figures (memtrack killed) may
// have left its last checkpoint (WriterOptions::checkpoint_interval). Reads
// it into `parts`; returns why it cannot serve, empty when it can.
std::string read_checkpoint(const std::string& checkpoint, const ArtifactHeader& header, AggregateState& parts,
                            uint64_t& taken_ns) {
  ReadResult read = read_artifact(
      checkpoint, [](const Event&) {}, [](const ModuleInfo&) {}, [&](const AggregatePart& part) { parts.add(part); });
  if (read.error) return "cannot be read: " + *read.error;
  if (read.header.start_monotonic_ns != header.start_monotonic_ns || read.header.command != header.command ||
      read.header.host != header.host)
    return "is of another recording (its header differs)";
  if (std::optional<std::string> missing = parts.missing()) return "holds " + *missing;
  taken_ns = read.trailer ? read.trailer->end_monotonic_ns : 0;
  return {};
}

}  // namespace

AnalyzedRecording analyze_recording(const AnalysisOptions& options) {
  ArtifactHeader header = read_artifact_header(options.file);
  const bool aggregated_figures = aggregated(header);
  if (aggregated_figures) refuse_event_options(options);
  EventFilter filter;
  filter.pids = options.pids;
  filter.tids = options.tids;
  if (options.from_s) filter.from_ns = seconds_to_ns(*options.from_s, "--from");
  if (options.to_s) filter.to_ns = seconds_to_ns(*options.to_s, "--to");
  ProfileOptions profile_options;
  profile_options.symbols = options.symbols;
  profile_options.function = options.function;
  profile_options.show_runtime_leaks = options.show_runtime_leaks;
  profile_options.split_by_thread = options.sites_by_thread;
  if (!options.suppressions_file.empty())
    profile_options.suppressions = Suppressions::from_file(options.suppressions_file);

  const EventFilter selection = filter;  // the allocations the sites count
  std::optional<uint64_t> live_at_ns;
  if (options.at_s) live_at_ns = seconds_to_ns(*options.at_s, "--at");
  HeapReplay heap_replay(std::move(filter), header.start_monotonic_ns, live_at_ns, recording_attached(header));
  ProfileBuilder profile_builder(std::move(profile_options));
  TimelineOptions timeline_options;
  if (options.from_s) timeline_options.from_ns = seconds_to_ns(*options.from_s, "--from");
  if (options.to_s) timeline_options.to_ns = seconds_to_ns(*options.to_s, "--to");
  if (options.call_paths && options.site_timelines) timeline_options.site_slices = kReportSiteSlices;
  TimelineBuilder timeline_builder(timeline_options, header.start_monotonic_ns);
  std::optional<Timeline> timeline;
  std::vector<std::string> module_warnings;
  if (!options.modules_dir.empty()) {
    ModuleArtifacts artifacts = read_module_artifacts(options.modules_dir);
    for (const ModuleInfo& module : artifacts.modules) profile_builder.on_module(module);
    module_warnings = std::move(artifacts.warnings);
  }
  std::optional<Report> report;
  std::optional<Profile> profile;
  ReadResult read;
  AggregateState aggregate_state;
  {
    uint64_t events_read = 0;
    Consumer analysis([&](const Batch& batch) {
      batch.for_each([&](const Event& e, SiteId site) {
        heap_replay.on_event(e, site);
        std::optional<uint32_t> selected_site;
        if (timeline_options.site_slices > 0 && is_allocation(e.type) &&
            selection.selects(e, header.start_monotonic_ns))
          selected_site = site;
        timeline_builder.on_event(e, heap_replay.live_bytes_of(e.pid), selected_site);
      });
    });
    std::unique_ptr<Batch> batch = analysis.empty_batch();
    auto flush = [&] {
      if (batch->items.empty()) return;
      analysis.push(std::move(batch));
      batch = analysis.empty_batch();
    };
    read = read_artifact(
        options.file,
        [&](const Event& e) {
          // `check` needs heap figures only: no call paths (site 0 for every event).
          SiteId site = options.call_paths ? profile_builder.on_event(e) : 0;
          // Mappings and stack definitions serve the profile builder alone.
          // An aggregated recording's figures come with its state instead.
          if (e.type != EventType::Mapping && e.type != EventType::Stack && !aggregated_figures) {
            batch->add(e, site);
            if (batch->items.size() == kBatchEvents) flush();
          }
          if (++events_read % kProgressEvery == 0 && options.progress.events_read)
            options.progress.events_read(events_read);
        },
        [&](const ModuleInfo& m) { profile_builder.on_module(m); },
        [&](const AggregatePart& part) { aggregate_state.add(part); });
    flush();
    analysis.finish();
    heap_replay.finish();
    if (aggregated_figures) {
      AggregateState checkpoint_state;
      const AggregateState* state = &aggregate_state;
      if (std::optional<std::string> missing = aggregate_state.missing()) {
        const std::string checkpoint = checkpoint_path(options.file);
        std::error_code no_file;
        uint64_t taken_ns = 0;
        if (!std::filesystem::exists(checkpoint, no_file)) {
          read.warnings.push_back(fmt::format("{}: no heap figures: {}", options.file, *missing));
        } else if (std::string why = read_checkpoint(checkpoint, read.header, checkpoint_state, taken_ns);
                   !why.empty()) {
          read.warnings.push_back(
              fmt::format("{}: no heap figures: {}; its checkpoint {} {}", options.file, *missing, checkpoint, why));
        } else {
          state = &checkpoint_state;
          read.warnings.push_back(fmt::format(
              "{}: the recording ended before memtrack wrote its figures: the heap figures are those of its last "
              "checkpoint ({}), {:.1f} s into the recording; what came after is not counted",
              options.file, checkpoint,
              taken_ns > read.header.start_monotonic_ns ? (taken_ns - read.header.start_monotonic_ns) / 1e9 : 0.0));
        }
      }
      if (!state->missing()) {
        try {
          AggregatedFigures figures = restore_aggregate(
              state->bytes(),
              [&](uint64_t stack_hash, int32_t pid, int32_t tid) {
                return options.call_paths ? profile_builder.allocation_site(stack_hash, pid, tid) : 0;
              },
              header.start_monotonic_ns, recording_attached(header));
          heap_replay = std::move(figures.replay);
          timeline = std::move(figures.timeline);
          if (timeline_options.site_slices == 0) timeline->sites = {};
        } catch (const std::runtime_error& e) {
          read.warnings.push_back(fmt::format("{}: no heap figures: {}", options.file, e.what()));
        }
      }
    }
    if (options.progress.reading_done) options.progress.reading_done();
    std::vector<std::string> warnings = read.warnings;
    if (read.error) warnings.push_back(*read.error);
    if (read.trailer)
      for (std::string& note : python_notes(read.trailer->counters)) warnings.push_back(std::move(note));
    report = heap_replay.build_report(read.header, read.trailer, warnings);
    if (!timeline) timeline = timeline_builder.build();
    set_peak_rss(*report, *timeline);
    profile = options.call_paths ? profile_builder.build(heap_replay) : Profile{};
    heap_replay.exclude_leaks(*report, profile->runtime_replay_sites, profile->suppressed_replay_sites);
    profile->warnings.insert(profile->warnings.begin(), module_warnings.begin(), module_warnings.end());
    profile->start_realtime_ns = read.header.start_realtime_ns;
    profile->duration_ns = report->totals.duration_ns;
    profile->live_at_ns = live_at_ns;
    profile->attached = report->attached;
    for (const std::string& arg : read.header.command) profile->command += (profile->command.empty() ? "" : " ") + arg;
  }
  return {std::move(*report), std::move(*profile), std::move(read.warnings), std::move(read.error), std::move(*timeline)};
}

}  // namespace memtrack
