#include "cli/report_command.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "cli/exit_status.h"
#include "cli/progress.h"
#include "output/output.h"

namespace memtrack {
namespace {

std::string seconds(double s) { return fmt::format("{:g} s", s); }

// With --at: when nothing selected was live then, or the moment is past the
// recording's end, says so; "" otherwise.
std::string describe_empty_moment(const AnalysisOptions& options, const Report& report, const Profile& profile,
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
std::string describe_empty_selection(const AnalysisOptions& options, const Report& report, const Profile& profile) {
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

int run_report(const ReportOptions& options) {
  const OutputFormat* format = find_output_format(options.format);
  AnalysisOptions analysis = options.analysis;
  // Outputs that label samples by thread, or group them by process; that
  // filter call paths by time.
  analysis.sites_by_thread = format && format->sites_by_thread;
  analysis.site_timelines = format && format->site_timelines;
  AnalyzedRecording analyzed = [&] {
    TerminalProgress progress;
    analysis.progress = progress.callbacks();
    return analyze_recording(analysis);
  }();
  const Report* report = &analyzed.report;
  const Profile* profile = &analyzed.profile;

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
                               describe_empty_selection(options.analysis, *report, *profile), options.output};
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
