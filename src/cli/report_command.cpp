#include "cli/report_command.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "analyze/heap_replay.h"
#include "analyze/timeline.h"
#include "cli/exit_status.h"
#include "format/artifact.h"
#include "module/module_artifacts.h"
#include "output/output.h"
#include "util/bounded_queue.h"

namespace memtrack {
namespace {

constexpr uint64_t kProgressEvery = 1 << 20;
constexpr size_t kBatchEvents = 1 << 14;
constexpr size_t kBatchStackBytes = 2 << 20;  // raw stack copies make events large
constexpr size_t kQueuedBatches = 8;  // per consumer: bounds memory to a few MB of events
// Slices of time of each call path's allocations, for outputs that filter
// call paths by time (the HTML page's brushing).
constexpr size_t kSiteSlices = 256;

// What the reader hands the consumers: events in file order, then (in their
// own batch, so they follow every event before them) Module records.
struct Batch {
  std::vector<Event> events;
  std::vector<ModuleInfo> modules;
};

// The analysis on a thread of its own, fed batches through a bounded queue,
// so that it gets a core while the reader decodes: the profile builder names
// each allocation's call site and the heap replay counts it, per process and
// per site at once.
class Consumer {
 public:
  explicit Consumer(std::function<void(const Batch&)> consume)
      : consume_(std::move(consume)), thread_([this] { run(); }) {}
  // Without finish() (the reader threw): stops after the queued batches.
  ~Consumer() { stop(); }

  // Refused once the consumer failed: finish() reports it.
  void push(std::shared_ptr<const Batch> batch) { batches_.push(std::move(batch)); }
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
    while (std::optional<std::shared_ptr<const Batch>> batch = batches_.pop()) {
      try {
        consume_(**batch);
      } catch (...) {
        failure_ = std::current_exception();  // read after the join
        batches_.shutdown();
        return;
      }
    }
  }

  std::function<void(const Batch&)> consume_;
  BoundedQueue<std::shared_ptr<const Batch>> batches_{kQueuedBatches};
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

// Progress on stderr, only when it is a terminal (never in logs or pipes).
class Progress {
 public:
  Progress() : enabled_(isatty(STDERR_FILENO) == 1) {}
  void event() {
    if (enabled_ && ++events_ % kProgressEvery == 0)
      std::cerr << fmt::format("\rmemtrack: {:.1f} M events read", static_cast<double>(events_) / 1e6) << std::flush;
  }
  void phase(const char* what) {
    if (enabled_) std::cerr << "\rmemtrack: " << what << "                    " << std::flush;
  }
  ~Progress() {
    if (enabled_) std::cerr << "\r\x1b[K" << std::flush;
  }

 private:
  bool enabled_;
  uint64_t events_ = 0;
};

std::string seconds(double s) { return fmt::format("{:g} s", s); }

// With --at: when nothing selected was live then, or the moment is past the
// recording's end, says so; "" otherwise.
std::string describe_empty_moment(const ReportOptions& options, const Report& report, const Profile& profile,
                                  bool filtered) {
  double duration_s = static_cast<double>(report.totals.duration_ns) / 1e9;
  if (*options.at_s > duration_s)
    return fmt::format("--at {} is after the end of the recording ({:.3f} s): what was live at its end",
                       seconds(*options.at_s), duration_s);
  if (profile.totals.peak_bytes == 0)
    return fmt::format("nothing{} was live at {}", filtered ? " the filters selected" : "",
                       seconds(*options.at_s));
  return "";
}

// When filters were given and selected nothing: what they matched, from the
// first filter that explains it; "" otherwise.
std::string describe_empty_selection(const ReportOptions& options, const Report& report, const Profile& profile) {
  bool filtered = !options.pids.empty() || !options.tids.empty() || options.from_s || options.to_s ||
                  !options.function.empty();
  if (profile.totals.allocations > 0 || !filtered)
    return options.at_s ? describe_empty_moment(options, report, profile, filtered) : "";
  std::vector<int32_t> allocating;
  for (const ProcessReport& process : report.processes)
    if (process.figures.alloc_calls() > 0 &&
        std::find(allocating.begin(), allocating.end(), process.pid) == allocating.end())
      allocating.push_back(process.pid);
  auto pid_list = [&] {
    if (allocating.empty()) return std::string("no allocation at all");
    constexpr size_t kListed = 10;
    std::string list = allocating.size() == 1 ? "pid " : "pids ";
    for (size_t i = 0; i < std::min(allocating.size(), kListed); ++i)
      list += fmt::format("{}{}", i ? ", " : "", allocating[i]);
    if (allocating.size() > kListed) list += fmt::format(" and {} more", allocating.size() - kListed);
    return list;
  };
  if (options.from_s && options.to_s && *options.from_s > *options.to_s)
    return fmt::format("no allocation: --from {} is after --to {}", seconds(*options.from_s), seconds(*options.to_s));
  std::vector<int32_t> absent;
  for (int32_t pid : options.pids)
    if (std::find(allocating.begin(), allocating.end(), pid) == allocating.end()) absent.push_back(pid);
  if (!absent.empty() && absent.size() == options.pids.size()) {
    std::string asked;
    for (int32_t pid : absent) asked += fmt::format("{}{}", asked.empty() ? "" : ", ", pid);
    return fmt::format("no allocation of pid {}; the recording has {}", asked, pid_list());
  }
  double duration_s = static_cast<double>(report.totals.duration_ns) / 1e9;
  if (options.from_s && *options.from_s > duration_s)
    return fmt::format("no allocation from {} on: the recording lasts {:.3f} s", seconds(*options.from_s),
                       duration_s);
  uint64_t with_stack = 0;
  for (int i = 0; i < kStackOutcomeCount; ++i) with_stack += profile.definitions_by_outcome[i];
  if (!options.function.empty())
    return with_stack == 0
               ? fmt::format("no call path has a function containing \"{}\": the recording has no call paths "
                             "(recorded with --no-stacks)",
                             options.function)
               : fmt::format("no call path has a function containing \"{}\"", options.function);
  std::string filters;
  for (int32_t pid : options.pids) filters += fmt::format(" --pid {}", pid);
  for (int32_t tid : options.tids) filters += fmt::format(" --tid {}", tid);
  if (options.from_s) filters += fmt::format(" --from {}", *options.from_s);
  if (options.to_s) filters += fmt::format(" --to {}", *options.to_s);
  size_t filter_count = options.pids.size() + options.tids.size() + (options.from_s ? 1 : 0) + (options.to_s ? 1 : 0);
  return fmt::format("no allocation matched{}{}; the recording has {} and lasts {:.3f} s", filters,
                     filter_count > 1 ? " (all of them)" : "", pid_list(), duration_s);
}

}  // namespace

AnalyzedRecording analyze_recording(const ReportOptions& options) {
  ArtifactHeader header = read_artifact_header(options.file);
  EventFilter filter;
  filter.pids = options.pids;
  filter.tids = options.tids;
  if (options.from_s) filter.from_ns = seconds_to_ns(*options.from_s, "--from");
  if (options.to_s) filter.to_ns = seconds_to_ns(*options.to_s, "--to");
  ProfileOptions profile_options;
  profile_options.symbols = options.symbols;
  profile_options.function = options.function;
  profile_options.show_runtime_leaks = options.show_runtime_leaks;
  // Outputs that label samples by thread, or group them by process.
  const OutputFormat* format = find_output_format(options.format);
  profile_options.split_by_thread = format && format->sites_by_thread;
  if (!options.suppressions_file.empty())
    profile_options.suppressions = Suppressions::from_file(options.suppressions_file);

  const EventFilter selection = filter;  // the allocations the sites count
  std::optional<uint64_t> live_at_ns;
  if (options.at_s) live_at_ns = seconds_to_ns(*options.at_s, "--at");
  HeapReplay heap_replay(std::move(filter), header.start_monotonic_ns, live_at_ns);
  ProfileBuilder profile_builder(std::move(profile_options));
  TimelineOptions timeline_options;
  if (options.from_s) timeline_options.from_ns = seconds_to_ns(*options.from_s, "--from");
  if (options.to_s) timeline_options.to_ns = seconds_to_ns(*options.to_s, "--to");
  if (options.call_paths && format && format->site_timelines) timeline_options.site_slices = kSiteSlices;
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
  {
    Progress progress;
    // `check` needs heap figures only: no call paths (site 0 for every event).
    Consumer analysis([&](const Batch& batch) {
      if (!options.call_paths) {
        for (const Event& e : batch.events) {
          heap_replay.on_event(e);
          timeline_builder.on_event(e, heap_replay.live_bytes_of(e.pid));
        }
        return;
      }
      for (const Event& e : batch.events) {
        SiteId site = profile_builder.on_event(e);
        heap_replay.on_event(e, site);
        std::optional<uint32_t> selected_site;
        if (timeline_options.site_slices > 0 && is_allocation(e.type) &&
            selection.selects(e, header.start_monotonic_ns))
          selected_site = site;
        timeline_builder.on_event(e, heap_replay.live_bytes_of(e.pid), selected_site);
      }
      for (const ModuleInfo& m : batch.modules) profile_builder.on_module(m);
    });
    auto batch = std::make_shared<Batch>();
    size_t batch_stack_bytes = 0;
    auto flush = [&] {
      if (batch->events.empty() && batch->modules.empty()) return;
      analysis.push(batch);
      batch = std::make_shared<Batch>();
      batch->events.reserve(kBatchEvents);
      batch_stack_bytes = 0;
    };
    batch->events.reserve(kBatchEvents);
    read = read_artifact(
        options.file,
        [&](const Event& e) {
          batch->events.push_back(e);
          if (e.stack) batch_stack_bytes += e.stack->bytes.size();
          if (batch->events.size() == kBatchEvents || batch_stack_bytes >= kBatchStackBytes) flush();
          progress.event();
        },
        [&](const ModuleInfo& m) {
          flush();
          batch->modules.push_back(m);
          flush();
        });
    flush();
    analysis.finish();
    heap_replay.finish();
    progress.phase("unwinding and symbolizing");
    std::vector<std::string> warnings = read.warnings;
    if (read.error) warnings.push_back(*read.error);
    report = heap_replay.build_report(read.header, read.trailer, warnings);
    timeline = timeline_builder.build();
    set_peak_rss(*report, *timeline);
    profile = options.call_paths ? profile_builder.build(heap_replay) : Profile{};
    heap_replay.exclude_leaks(*report, profile->runtime_replay_sites, profile->suppressed_replay_sites);
    profile->warnings.insert(profile->warnings.begin(), module_warnings.begin(), module_warnings.end());
    profile->start_realtime_ns = read.header.start_realtime_ns;
    profile->duration_ns = report->totals.duration_ns;
    profile->live_at_ns = live_at_ns;
    for (const std::string& arg : read.header.command) profile->command += (profile->command.empty() ? "" : " ") + arg;
  }
  return {std::move(*report), std::move(*profile), std::move(read.warnings), std::move(read.error), std::move(*timeline)};
}

int run_report(const ReportOptions& options) {
  AnalyzedRecording analyzed = analyze_recording(options);
  const Report* report = &analyzed.report;
  const Profile* profile = &analyzed.profile;

  const OutputFormat* format = find_output_format(options.format);
  if (!format) throw std::runtime_error("no output format \"" + options.format + "\" (" + output_format_names(", ") + ")");
  std::ofstream file;
  if (!options.output.empty()) {
    file.open(options.output, std::ios::binary);
    if (!file) throw std::runtime_error("cannot write " + options.output);
  } else if (format->binary && isatty(STDOUT_FILENO)) {
    throw std::runtime_error(fmt::format("a {} is binary: give -o FILE (or redirect stdout)", format->noun));
  }
  std::ostream& out = options.output.empty() ? std::cout : file;
  OutputOptions output_options{options.by, options.top, options.tree, options.verbose,
                               options.output.empty() && isatty(STDOUT_FILENO),
                               describe_empty_selection(options, *report, *profile), options.output};
  if (!output_options.filter_note.empty() && !format->carries_notes)
    std::cerr << "memtrack: " << output_options.filter_note << "\n";
  format->write(ReportModel{*report, *profile, &analyzed.timeline}, output_options, out);
  out.flush();
  if (!out) throw std::runtime_error("cannot write " + (options.output.empty() ? "stdout" : options.output));
  // Outputs that cannot carry the reader's warnings leave them to stderr.
  if (!format->carries_notes)
    for (const std::string& w : analyzed.read_warnings) std::cerr << "memtrack: warning: " << w << "\n";
  if (analyzed.read_error) std::cerr << "memtrack: " << *analyzed.read_error << "\n";
  return analyzed.damaged() ? exit_status::kDamagedInput : exit_status::kOk;
}

}  // namespace memtrack
