#include "output/text/text_output.h"
#include "output/text/timeline_text.h"

#include <algorithm>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "output/recording_limits.h"
#include "output/text/profile_text.h"
#include "output/text/text_writer.h"
#include "output/text/units.h"

namespace memtrack {

extern const OutputFormat kTextOutput{
    .name = "text",
    .summary = "for people: totals, the top allocating functions and call paths, leaks (80 columns)",
    .noun = "text report",
    .write = [](const ReportModel& model, const OutputOptions& options, std::ostream& sink) {
      ProfileView view = view_of(model, options);
      write_text_report(model.report, sink, {options.color, options.verbose}, &view);
    }};

namespace {

constexpr size_t kHistogramBarWidth = 40;
using text::fit;
using text::join;
using text::kLineWidth;
using text::TextWriter;
using text::wrap;

std::string describe_start(uint64_t realtime_ns) {
  if (realtime_ns == 0) return "unknown";
  auto seconds = static_cast<std::time_t>(realtime_ns / 1'000'000'000);
  return fmt::format("{:%Y-%m-%d %H:%M:%S} UTC", fmt::gmtime(seconds));
}

void write_header(TextWriter& w, const Report& report) {
  const ArtifactHeader& header = report.header;
  w.line(w.bold("memtrack report"));
  w.field("command", header.command.empty() ? "(unknown)" : join(header.command));
  w.field("host", fmt::format("{}, kernel {}", header.host, header.kernel));
  // What an older kernel made the recorder use instead (README, "Kernels"),
  // wrapped: the reason is the point.
  for (const std::string& fallback : header.kernel_fallbacks) w.warning(fmt::format("  {:<12}", "fallback"), fallback);
  w.field("started", describe_start(header.start_realtime_ns));
  w.field("duration", format_duration(report.totals.duration_ns));
  w.field("processes", fmt::format("{}, {}, {}", format_thousands(report.processes.size()),
                                   count_of(report.totals.threads, "thread"), count_of(report.events, "event")));
  auto recorded_by = [&](RecordedBy way) {
    return static_cast<size_t>(std::count_if(report.processes.begin(), report.processes.end(),
                                             [&](const ProcessReport& p) { return p.recorded_by == way; }));
  };
  size_t fast = recorded_by(RecordedBy::Interposer), both = recorded_by(RecordedBy::Both);
  size_t total = report.processes.size();
  const std::vector<std::string>& features = report.header.features;
  bool interposer_on = std::find(features.begin(), features.end(), "interposer") != features.end();
  if (!report.lost_events && interposer_on && fast < total)
    // The records saying a process's interposer took over come as it does:
    // those of an artifact that was never finalized may be lost.
    w.field("recorded by", fmt::format("unknown for {} of {} process{} (the recording was not finalized)",
                                       total - fast, total, total == 1 ? "" : "es"));
  else if (fast == total && total > 0)
    w.field("recorded by", "the fast path (in-process interposer)");
  else if (fast == 0 && both == 0)
    w.field("recorded by", "uprobes (a kernel entry per allocator call)");
  else
    w.field("recorded by", fmt::format("the fast path (in-process interposer) for {} of {} process{}{}, uprobes for "
                                       "the rest (--verbose: which)",
                                       fast, total, total == 1 ? "" : "es",
                                       both ? fmt::format(", both for {} (an exec between)", both) : ""));
  if (report.counters && report.counters->contains("probe_floor_ns")) {
    w.field("probe cost", fmt::format("{:.1f} \u00b5s per allocator call recorded by uprobes, measured at start",
                                      report.counters->at("probe_floor_ns") / 1000.0));
  }
  bool finalized = report.lost_events.has_value();
  w.field("exit", report.exit_status               ? format_wait_status(*report.exit_status)
                  : report.attached && finalized ? "none: the process ran on after the recording"
                                                 : "unknown (recording not finalized)");
  for (const std::string& limit : recording_limits(report)) w.field("cannot know", limit);
}

void write_losses(TextWriter& w, const Report& report) {
  if (!report.lost_events) {
    w.warning("", "WARNING: lost events unknown: the recording was not finalized");
    return;
  }
  if (*report.lost_events == 0) {
    w.line("lost events: 0");
    return;
  }
  std::string lost = fmt::format("WARNING: {} events lost:", *report.lost_events);
  for (const auto& [name, value] : *report.counters) {
    if (is_loss_counter(name) && value > 0) lost += fmt::format(" {}={}", name, value);
  }
  for (const std::string& wrapped : wrap(lost, kLineWidth)) w.line(w.red(wrapped));
}

// "  label                    value  note": values right-aligned in one column.
void figure(TextWriter& w, std::string_view label, std::string_view value, std::string_view note,
            bool alarm = false) {
  std::string padded = fmt::format("{:>12}", value);
  std::string text = fmt::format("  {:<24}{}", label, alarm ? w.red(padded) : padded);
  // Measured before coloring: escape sequences take no columns.
  size_t used = 2 + std::max<size_t>(24, label.size()) + padded.size() + 2;
  if (!note.empty()) text += "  " + fit(note, kLineWidth - std::min(used, kLineWidth));
  w.line(text);
}

// Counts users compare are exact ("12,345"), abbreviated only when too wide.
std::string count_cell(uint64_t count, size_t width) {
  std::string exact = format_thousands(count);
  return exact.size() <= width ? exact : format_count(count, width);
}

// The rounded size in the value column, the exact one in the note.
std::string exact_note(uint64_t bytes) {
  return bytes < 1024 ? "" : fmt::format("({} B)", format_thousands(bytes));
}

std::string joined_note(std::string first, const std::string& second) {
  if (first.empty()) return second;
  if (second.empty()) return first;
  return first + ", " + second;
}

void write_totals(TextWriter& w, const Report& report) {
  constexpr size_t kCountWidth = 12;
  const HeapFigures& totals = report.totals;
  w.title("Totals");
  std::string kinds;
  for (auto [name, count] : {std::pair{"malloc", totals.calls.malloc}, {"calloc", totals.calls.calloc},
                             {"realloc", totals.calls.realloc}, {"aligned_alloc", totals.calls.aligned_alloc}})
    if (count > 0) kinds = joined_note(kinds, fmt::format("{} {}", name, format_thousands(count)));
  figure(w, "allocation calls", count_cell(totals.alloc_calls(), kCountWidth), fit(kinds, 40));
  figure(w, "free calls", count_cell(totals.free_calls, kCountWidth),
         fmt::format("unmatched {}", count_cell(totals.unmatched_frees, kCountWidth)));
  if (report.attached || totals.frees_of_earlier_blocks > 0)
    figure(w, "freed, allocated before", count_cell(totals.frees_of_earlier_blocks, kCountWidth),
           "blocks allocated before the recording");
  figure(w, "total allocated", format_bytes(totals.total_allocated),
         joined_note(exact_note(totals.total_allocated),
                     fmt::format("average {}", format_bytes(static_cast<uint64_t>(
                                                   totals.average_allocation_size() + 0.5)))));
  figure(w, "peak heap", format_bytes(totals.peak_memory),
         joined_note(exact_note(totals.peak_memory),
                     totals.peak_time_ns ? fmt::format("at {}", format_duration(*totals.peak_time_ns)) : ""));
  figure(w, "leaked", format_bytes(totals.leaked_bytes),
         joined_note(exact_note(totals.leaked_bytes),
                     "in " + count_of(totals.leaked_count, "block")),
         totals.leaked_bytes > 0);
  if (report.running_at_end() > 0)
    figure(w, "live at end", format_bytes(totals.live_at_end_bytes),
           joined_note(exact_note(totals.live_at_end_bytes),
                       "in " + count_of(totals.live_at_end_count, "block") + ", not leaks"));
  if (totals.runtime_held_count > 0)
    figure(w, "held by runtime", format_bytes(totals.runtime_held_bytes),
           "in " + count_of(totals.runtime_held_count, "block") + ", not leaks");
  if (totals.suppressed_leaked_count > 0)
    figure(w, "leaked, suppressed", format_bytes(totals.suppressed_leaked_bytes),
           "in " + count_of(totals.suppressed_leaked_count, "block"));
  if (totals.inherited_unfreed_count > 0)
    figure(w, "inherited, never freed", format_bytes(totals.inherited_unfreed_bytes),
           joined_note(exact_note(totals.inherited_unfreed_bytes),
                       "in " + count_of(totals.inherited_unfreed_count, "block")));
  figure(w, "temporary allocations", count_cell(totals.temporary_allocations, kCountWidth),
         fmt::format("{:.1f}% of allocation calls",
                     percent(totals.temporary_allocations, totals.alloc_calls())));
}

// The table's command cell is narrow: drop the directory of the first word
// ("/usr/bin/python3 x.py" -> "python3 x.py"). The header shows it in full.
std::string table_command(const std::string& command) {
  if (command.empty()) return "(unknown)";
  size_t first_word_end = std::min(command.find(' '), command.size());
  size_t last_slash = command.rfind('/', first_word_end);
  if (last_slash == std::string::npos || last_slash + 1 == first_word_end) return command;
  return command.substr(last_slash + 1);
}

// "running": the recording ended before the process.
std::string describe_exit(const ProcessReport& process) {
  if (process.exit_code) return format_wait_status(*process.exit_code);
  return process.running_at_end ? "running" : "-";
}

// The LIVE@END column, only where the recording ended before a process
// (other columns give it room: the short table's parent, the counts' width).
bool any_running_at_end(const std::vector<ProcessReport>& processes) {
  return std::any_of(processes.begin(), processes.end(), [](const ProcessReport& p) { return p.running_at_end; });
}

std::string live_at_end_cell(const ProcessReport& process, bool shown) {
  return shown ? fmt::format(" {:>10}", format_bytes(process.figures.live_at_end_bytes)) : "";
}

constexpr size_t kShortProcessRows = 5;

// One table of the processes that allocated most (skipped for a single
// process: the header and totals say it all).
void write_processes_short(TextWriter& w, const std::vector<ProcessReport>& processes) {
  if (processes.size() < 2) return;
  std::vector<const ProcessReport*> order;
  for (const ProcessReport& process : processes) order.push_back(&process);
  std::stable_sort(order.begin(), order.end(), [](const ProcessReport* a, const ProcessReport* b) {
    return a->figures.total_allocated > b->figures.total_allocated;
  });
  size_t shown = std::min(order.size(), kShortProcessRows);
  w.title(fmt::format("Processes: {} of {} by bytes allocated", shown, processes.size()));
  const bool live_column = any_running_at_end(processes);
  w.line(fmt::format("{:>7}{} {:>10} {:>10} {:>10}{} {:>9}  {}", "PID", live_column ? "" : fmt::format(" {:>7}", "PARENT"),
                     "ALLOCATED", "PEAK", "LEAKED", live_column ? fmt::format(" {:>10}", "LIVE@END") : "", "EXIT",
                     "COMMAND"));
  for (size_t i = 0; i < shown; ++i) {
    const ProcessReport& process = *order[i];
    const HeapFigures& f = process.figures;
    std::string parent = process.parent_pid ? fmt::format("{}", *process.parent_pid) : "-";
    std::string row = fmt::format("{:>7}{} {:>10} {:>10} {:>10}{} {:>9}  ", process.pid,
                                  live_column ? "" : fmt::format(" {:>7}", fit(parent, 7)),
                                  format_bytes(f.total_allocated), format_bytes(f.peak_memory),
                                  format_bytes(f.leaked_bytes), live_at_end_cell(process, live_column),
                                  fit(describe_exit(process), 9));
    w.line(row + fit(table_command(process.command), kLineWidth - std::min(row.size(), kLineWidth)));
  }
  if (order.size() > shown) w.line(fmt::format("  ... {} more (--verbose lists them all)", order.size() - shown));
}

// Two tables with the same row order: heap figures, then lifecycle.
void write_processes(TextWriter& w, const std::vector<ProcessReport>& processes) {
  w.title("Processes: heap");
  const bool live_column = any_running_at_end(processes);
  const size_t heap_counts = live_column ? 7 : 8;
  w.line(fmt::format("{:>7} {:>{}} {:>{}} {:>10} {:>10} {:>10}{}  {}", "PID", "ALLOCS", heap_counts, "FREES",
                     heap_counts, "ALLOCATED", "PEAK", "LEAKED", live_column ? fmt::format(" {:>10}", "LIVE@END") : "",
                     "COMMAND"));
  for (const ProcessReport& process : processes) {
    const HeapFigures& f = process.figures;
    std::string leaked = fmt::format("{:>10}", format_bytes(f.leaked_bytes));
    std::string live_at_end = live_at_end_cell(process, live_column);
    std::string row = fmt::format("{:>7} {:>{}} {:>{}} {:>10} {:>10} ", process.pid,
                                  format_count(f.alloc_calls(), heap_counts), heap_counts,
                                  format_count(f.free_calls, heap_counts), heap_counts,
                                  format_bytes(f.total_allocated), format_bytes(f.peak_memory));
    // Measured before coloring: escape sequences take no columns.
    size_t used = row.size() + leaked.size() + live_at_end.size() + 2;
    w.line(row + (f.leaked_bytes > 0 ? w.red(leaked) : leaked) + live_at_end + "  " +
           fit(table_command(process.command), kLineWidth - std::min(used, kLineWidth)));
  }
  constexpr size_t kCountWidth = 8;
  w.title("Processes: lifecycle");
  w.line(fmt::format("{:>7} {:>8} {:>8} {:>10} {:>10} {:>10}  {:<10}  {}", "PID", "PARENT", "THREADS",
                     "DURATION", "TEMPORARY", "UNMATCHED", "RECORDED", "EXIT"));
  for (const ProcessReport& process : processes) {
    const HeapFigures& f = process.figures;
    std::string parent = process.parent_pid ? fmt::format("{}", *process.parent_pid) : "-";
    std::string row = fmt::format("{:>7} {:>8} {:>8} {:>10} {:>10} {:>10}  {:<10}  ", process.pid, parent,
                                  format_count(f.threads, kCountWidth),
                                  format_duration(f.duration_ns),
                                  format_count(f.temporary_allocations, 10),
                                  format_count(f.unmatched_frees, 10), recorded_by_name(process.recorded_by));
    w.line(row + fit(describe_exit(process), kLineWidth - std::min(row.size(), kLineWidth)));
  }
}

std::string bucket_label(size_t bucket) {
  std::optional<uint64_t> max = SizeHistogram::bucket_max(bucket);
  if (max) return "<= " + format_power_of_two(*max);
  return "> " + format_power_of_two(SizeHistogram::bucket_min(bucket) - 1);
}

// Rows from the smallest to the largest non-empty bucket.
void write_histogram(TextWriter& w, const SizeHistogram& histogram, uint64_t alloc_calls) {
  w.title("Allocation sizes");
  size_t first = SizeHistogram::kBucketCount;
  size_t last = 0;
  uint64_t largest = 0;
  for (size_t i = 0; i < SizeHistogram::kBucketCount; ++i) {
    if (histogram.count(i) == 0) continue;
    first = std::min(first, i);
    last = i;
    largest = std::max(largest, histogram.count(i));
  }
  if (largest == 0) {
    w.line("  (no allocations)");
    return;
  }
  for (size_t i = first; i <= last; ++i) {
    uint64_t count = histogram.count(i);
    // Rounded to nearest, but a non-empty bucket always shows one mark.
    size_t bar = static_cast<size_t>((count * kHistogramBarWidth + largest / 2) / largest);
    if (count > 0) bar = std::max<size_t>(bar, 1);
    w.line(fmt::format("  {:>10}  {:<{}}  {:>12}  {:>5.1f}%", bucket_label(i), std::string(bar, '#'),
                       kHistogramBarWidth, format_count(count, 12), percent(count, alloc_calls)));
  }
}

void write_counters(TextWriter& w, const std::map<std::string, uint64_t>& counters) {
  w.title("Recorder counters");
  if (counters.empty()) {
    w.line("  (none)");
    return;
  }
  for (const auto& [name, value] : counters) {
    w.line(fmt::format("  {:<56} {:>20}", fit(name, 56), value));
  }
}

void write_warnings(TextWriter& w, const std::vector<std::string>& warnings) {
  if (warnings.empty()) return;
  w.title("Warnings");
  for (const std::string& warning : warnings) w.warning("  - ", warning);
}

}  // namespace

void write_text_report(const Report& report, std::ostream& out, const TextOptions& options, const ProfileView* view) {
  TextWriter w(out, options.color);
  write_header(w, report);
  write_losses(w, report);
  write_totals(w, report);
  if (view && view->timeline) write_timeline_text(*view->timeline, out, options.color, options.verbose);
  if (view) write_profile_text(*view, out, options.color, options.verbose);
  if (options.verbose) {
    if (!report.processes.empty()) write_processes(w, report.processes);
    write_histogram(w, report.totals.histogram, report.totals.alloc_calls());
  } else {
    write_processes_short(w, report.processes);
  }
  // Counters explain losses: shown whenever something was lost.
  bool lost = report.lost_events && *report.lost_events > 0;
  if (report.counters && (options.verbose || lost)) write_counters(w, *report.counters);
  write_warnings(w, report.warnings);
}

}  // namespace memtrack
