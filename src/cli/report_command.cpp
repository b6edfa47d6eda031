#include "cli/report_command.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "analyze/heap_analyzer.h"
#include "cli/exit_status.h"
#include "format/artifact.h"
#include "module/module_artifacts.h"
#include "report/folded_output.h"
#include "report/html_report.h"
#include "report/json_report.h"
#include "report/pprof_output.h"
#include "report/speedscope_output.h"
#include "report/text_report.h"

namespace memtrack {
namespace {

constexpr uint64_t kProgressEvery = 1 << 20;
constexpr size_t kBatchEvents = 1 << 14;
constexpr size_t kBatchStackBytes = 2 << 20;  // raw stack copies make events large
constexpr size_t kQueuedBatches = 8;  // per consumer: bounds memory to a few MB of events

// What the reader hands the consumers: events in file order, then (in their
// own batch, so they follow every event before them) Module records.
struct Batch {
  std::vector<Event> events;
  std::vector<ModuleInfo> modules;
};

// One analysis on a thread of its own, fed batches through a bounded queue:
// the per-process figures and the profile are independent consumers of the
// same stream, so each gets a core while the reader decodes.
class Consumer {
 public:
  explicit Consumer(std::function<void(const Batch&)> consume)
      : consume_(std::move(consume)), thread_([this] { run(); }) {}
  // Without finish() (the reader threw): stops after the queued batches.
  ~Consumer() { stop(); }

  void push(std::shared_ptr<const Batch> batch) {
    std::unique_lock lock(mutex_);
    space_.wait(lock, [&] { return queue_.size() < kQueuedBatches || failure_; });
    if (failure_) return;  // reported by finish()
    queue_.push_back(std::move(batch));
    ready_.notify_one();
  }
  // Waits for every batch to be consumed; rethrows what the consumer threw.
  void finish() {
    stop();
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  }

 private:
  void stop() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    ready_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

  void run() {
    for (;;) {
      std::shared_ptr<const Batch> batch;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [&] { return !queue_.empty() || done_; });
        if (queue_.empty()) return;
        batch = std::move(queue_.front());
        queue_.pop_front();
      }
      space_.notify_one();
      try {
        consume_(*batch);
      } catch (...) {
        std::lock_guard lock(mutex_);
        failure_ = std::current_exception();
        queue_.clear();
        space_.notify_all();
        return;
      }
    }
  }

  std::function<void(const Batch&)> consume_;
  std::mutex mutex_;
  std::condition_variable ready_, space_;
  std::deque<std::shared_ptr<const Batch>> queue_;
  bool done_ = false;
  std::exception_ptr failure_;
  std::thread thread_;
};

uint64_t seconds_to_ns(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) throw std::runtime_error("--from/--to must be seconds >= 0");
  // Beyond 2^64 ns (585 years) the conversion would be undefined: the end of time.
  double ns = seconds * 1e9;
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

// When filters were given and selected nothing: what they matched, from the
// first filter that explains it; "" otherwise.
std::string describe_empty_selection(const ReportOptions& options, const Report& report, const Profile& profile) {
  bool filtered = !options.pids.empty() || !options.tids.empty() || options.from_s || options.to_s ||
                  !options.function.empty();
  if (!filtered || profile.totals.allocations > 0) return "";
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
                             "(record with --stacks)",
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

int run_report(const ReportOptions& options) {
  ArtifactHeader header = read_artifact_header(options.file);
  ProfileOptions profile_options;
  profile_options.filter.pids = options.pids;
  profile_options.filter.tids = options.tids;
  if (options.from_s) profile_options.filter.from_ns = seconds_to_ns(*options.from_s);
  if (options.to_s) profile_options.filter.to_ns = seconds_to_ns(*options.to_s);
  profile_options.symbols = options.symbols;
  profile_options.function = options.function;
  profile_options.show_runtime_leaks = options.show_runtime_leaks;
  // Their samples are labelled by thread, or grouped by process.
  profile_options.split_by_thread = options.format == "pprof" || options.format == "speedscope";
  if (!options.suppressions_file.empty())
    profile_options.suppressions = Suppressions::from_file(options.suppressions_file);

  HeapAnalyzer analyzer;
  ProfileBuilder profile_builder(std::move(profile_options), header.start_monotonic_ns);
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
    Consumer heap([&](const Batch& batch) {
      for (const Event& e : batch.events) analyzer.on_event(e);
    });
    Consumer sites([&](const Batch& batch) {
      for (const Event& e : batch.events) profile_builder.on_event(e);
      for (const ModuleInfo& m : batch.modules) profile_builder.on_module(m);
    });
    auto batch = std::make_shared<Batch>();
    size_t batch_stack_bytes = 0;
    auto flush = [&] {
      if (batch->events.empty() && batch->modules.empty()) return;
      heap.push(batch);
      sites.push(batch);
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
    heap.finish();
    sites.finish();
    progress.phase("unwinding and symbolizing");
    std::vector<std::string> warnings = read.warnings;
    if (read.error) warnings.push_back(*read.error);
    report = analyzer.build_report(read.header, read.trailer, warnings);
    profile = profile_builder.build();
    profile->warnings.insert(profile->warnings.begin(), module_warnings.begin(), module_warnings.end());
    profile->start_realtime_ns = read.header.start_realtime_ns;
    profile->duration_ns = report->totals.duration_ns;
    for (const std::string& arg : read.header.command) profile->command += (profile->command.empty() ? "" : " ") + arg;
  }

  std::ofstream file;
  if (!options.output.empty()) {
    file.open(options.output, std::ios::binary);
    if (!file) throw std::runtime_error("cannot write " + options.output);
  } else if (options.format == "pprof" && isatty(STDOUT_FILENO)) {
    throw std::runtime_error("a pprof profile is binary: give -o FILE (or redirect stdout)");
  }
  std::ostream& out = options.output.empty() ? std::cout : file;
  ProfileView view{&*profile, options.by, options.top, options.tree};
  view.filter_note = describe_empty_selection(options, *report, *profile);
  bool is_export = options.format == "folded" || options.format == "pprof" || options.format == "speedscope";
  if (!view.filter_note.empty() && is_export)
    std::cerr << "memtrack: " << view.filter_note << "\n";
  if (options.format == "json") {
    write_json_report(*report, out, &view);
  } else if (options.format == "folded") {
    write_folded(*profile, options.by, out);
  } else if (options.format == "pprof" || options.format == "speedscope") {
    std::map<int32_t, std::string> commands;
    for (const ProcessReport& process : report->processes) commands[process.pid] = process.command;
    if (options.format == "pprof") write_pprof(*profile, out, commands);
    else write_speedscope(*profile, out, commands);
  } else if (options.format == "html") {
    write_html_report(*report, view, out);
  } else {
    write_text_report(*report, out, {options.output.empty() && isatty(STDOUT_FILENO), options.verbose}, &view);
  }
  out.flush();
  if (!out) throw std::runtime_error("cannot write " + (options.output.empty() ? "stdout" : options.output));
  // Text and JSON reports carry the reader's warnings; the exports cannot:
  // stderr says it.
  if (is_export)
    for (const std::string& w : read.warnings) std::cerr << "memtrack: warning: " << w << "\n";
  if (read.error) std::cerr << "memtrack: " << *read.error << "\n";
  return read.error || !read.warnings.empty() ? exit_status::kDamagedInput : exit_status::kOk;
}

}  // namespace memtrack
