// The memtrack command: record, report, diff, check, info.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analyze/heap_aggregate.h"
#include "analyze/report.h"
#include "cli/convert.h"
#include "cli/diff_command.h"
#include "cli/exit_status.h"
#include "cli/info.h"
#include "cli/report_command.h"
#include "export/module_export.h"
#include "format/artifact.h"
#include "output/output.h"
#include "record/recorder.h"
#include "record/process/target_process.h"
#include "output/diff/diff_output.h"

namespace {

namespace status = memtrack::exit_status;

// Each worker holds up to 2 frames of up to 64 MiB: beyond 64 workers the
// buffers alone could take GBs, and no machine compresses faster with more.
constexpr unsigned kMaxEncodeWorkers = 64;

// "abc", "nan" and "inf" are not numbers of anything: refused with a message
// (std::stod would throw out of CLI11's validation).
std::optional<double> finite_number(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(value)) return std::nullopt;
  return value;
}

const CLI::Validator kRingMib(
    [](std::string& text) -> std::string {
      const auto mib = finite_number(text);
      if (!mib) return "not a number: " + text;
      const double bytes = *mib * 1024 * 1024;
      const bool power_of_two = bytes >= 16384 && bytes <= double(4ull << 30) &&
                                bytes == std::floor(bytes) && std::has_single_bit(static_cast<uint64_t>(bytes));
      return power_of_two ? std::string() : "the ring size must be a power of two from 1/64 to 4096 MiB";
    },
    "POWER OF TWO");

const CLI::Validator kSeconds(
    [](std::string& text) -> std::string {
      const auto seconds = finite_number(text);
      return seconds && *seconds >= 0 ? std::string() : "not a number of seconds >= 0: " + text;
    },
    "SECONDS");

// What `record` exits with when memtrack itself fails.
int record_failure(const std::exception& e) {
  std::cerr << "memtrack record: " << e.what() << "\n";
  if (const auto* command = dynamic_cast<const memtrack::CommandError*>(&e))
    return command->code().value() == ENOENT ? status::kCommandNotFound : status::kCannotExecute;
  return status::kRecordFailed;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"memtrack: an eBPF memory-allocation profiler for native Linux programs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", MEMTRACK_VERSION);

  memtrack::RecordOptions rec;
  double ring_mib = 0, stack_ring_mib = 0;  // unset: by the path
  auto* record = app.add_subcommand("record", "Run a command (or attach to a process tree) and record its allocations");
  record->add_option("-o,--output", rec.output, "Artifact to write (default: memtrack.<prog>.<pid>.zst)");
  auto* pid = record->add_option("--pid", rec.attach_pid, "Attach to this running process and its descendants")
                 ->check(CLI::Range(1, std::numeric_limits<pid_t>::max()));
  record->add_option("--duration", rec.duration_s, "With --pid: stop after this many seconds")
      ->check(kSeconds)
      ->needs(pid);
  record->add_option("--ring-mib", ring_mib,
                     "Size of the kernel event ring in MiB (a power of two, >= 1/64; it counts twice in RSS; "
                     "default: 1 on the fast path, 8 when every allocation goes through the uprobes)")
      ->check(kRingMib);
  record->add_option("--stack-ring-mib", stack_ring_mib,
                     "Size of the kernel's ring of call-path definitions in MiB (a power of two, >= 1/64; it counts "
                     "twice in RSS; default: 1 on the fast path, 16 when every allocation goes through the uprobes)")
      ->check(kRingMib);
  record->add_option("--encode-workers", rec.encode_workers, "Compression threads, 1..64 (default: one per 7 cores)")
      ->check(CLI::Range(1u, kMaxEncodeWorkers));
  record->add_flag("--empty-probes", rec.empty_probes,
                   "Benchmark floor: attach the probes but record nothing");
  record->add_flag("--classic-uprobes", rec.classic_uprobes,
                   "Attach one perf uprobe per function instead of one uprobe link per file (the default on kernels < 6.6)");
  record->add_flag("--global-probes", rec.global_probes,
                   "One set of probes for every process, filtered in the kernel (cheaper per new process, "
                   "above all on kernels < 6.6; slows every process's allocations while recording; no fast path)");
  record->add_flag("--uprobes", rec.uprobes,
                   "Record every allocator call with uprobes (a kernel entry per call). By default the allocator "
                   "calls of dynamically linked processes are recorded in-process (an interposer loaded with "
                   "LD_PRELOAD, writing to shared memory) and the rest with uprobes");
  bool no_stacks = false;
  auto* no_stacks_flag = record->add_flag(
      "--no-stacks", no_stacks,
      "Record no call paths: cheaper, but reports cannot say where memory was allocated (docs/BENCHMARKS.md, "
      "\"Call paths\")");
  bool stacks = false;  // the default: accepted for the command lines that asked for it
  record->add_flag("--stacks", stacks, "Capture the call path of every allocation (the default)")
      ->excludes(no_stacks_flag);
  std::string stack_mode = "walk";
  record->add_option("--stack-mode", stack_mode,
                     "walk: the stack is walked with unwind rules at each allocation (default); raw: keep the raw bytes")
      ->check(CLI::IsMember({"walk", "raw"}))
      ->excludes(no_stacks_flag);
  record->add_option("--stack-budget", rec.stack_budget, "Bytes of stack copied per allocation, walked fast and kept when the walk cannot finish "
                     "(512..32768, default 8192; the walk goes on past the copy)")
      ->check(CLI::Range(512u, 32768u));
  bool no_unwind_cache = false;
  record->add_flag("--no-unwind-cache", no_unwind_cache,
                   "Neither read nor write the cache of files' unwind rules "
                   "($XDG_CACHE_HOME/memtrack/unwind-rules, else ~/.cache/memtrack/unwind-rules)");
  record->add_flag("--embed-modules", rec.embed_modules,
                   "Embed the symbols and unwind tables of every mapped file, for export-modules elsewhere");
  bool records_layout = false;
  record->add_flag("--records-layout", records_layout,
                   "Write one map per event with addresses and nanoseconds (format 2, the seed's layout) "
                   "instead of the compact layout");
  bool aggregate = false;
  auto* aggregate_flag =
      record->add_flag("--aggregate", aggregate,
                       "Keep the figures of every allocation instead of each one: a file that grows with call "
                       "paths, processes and time, not with events, for long runs (reports cannot then pick events "
                       "by --pid, --tid, --from, --to or --at)");
  record
      ->add_option("--checkpoint-every", rec.checkpoint_every_s,
                   "With --aggregate: write the figures so far to OUTPUT.checkpoint this often (0: never), so "
                   "that a recording killed before its end still reports them")
      ->check(kSeconds)
      ->capture_default_str()
      ->needs(aggregate_flag);
  bool no_memory = false;
  record->add_flag("--no-memory-records", no_memory,
                   "Record no RSS and no mappings made outside the allocators (no memory timeline in reports)");
  record->add_flag("--rss-sampling", rec.rss_sampling,
                   "Sample RSS from /proc/PID/statm every 10 ms instead of the kernel's rss_stat tracepoint "
                   "(the fallback where the hook is refused)");
  std::string hold = "signal";
  record->add_option("--hold", hold,
                     "How memtrack pauses tasks: signal (SIGSTOP; the command's processes can see the stops) or "
                     "ptrace (invisible to them; the command cannot be debugged or traced meanwhile). Default: signal")
      ->check(CLI::IsMember({"signal", "ptrace"}));
  record->add_flag("-q,--quiet", rec.quiet, "No summary on stderr");
  record->add_option("--probe-cost-warning", rec.probe_cost_warning_ns,
                     "Warn at start when one intercepted allocator call costs at least this many ns on this "
                     "machine (measured at start; 0: always show the cost)")
      ->capture_default_str();
  record->add_option("--snapshot-every", rec.snapshots.every_s,
                     "Also write a snapshot of the live heap (pprof, OUTPUT.snapshot-N.pb.gz) this many seconds "
                     "after the start, then as long after the previous one ended")
      ->check(kSeconds);
  std::vector<std::string> snapshot_when;
  record->add_option("--snapshot-when", snapshot_when,
                     "Write a snapshot when a condition starts to hold, and again each time its figure grows 10% "
                     "more: rss>=SIZE (the process tree's RSS), heap>=SIZE (bytes live), cgroup>=N% (of the "
                     "memory limit of the target's cgroup: v2 memory.max or v1 memory.limit_in_bytes; before the "
                     "OOM killer acts); SIZE in B, KiB, MiB, GiB, TiB (repeatable)");
  record->add_option("command", rec.command, "The command to run, after --");
  record->footer("SIGUSR1 to memtrack's pid writes a snapshot of the heap live then (pprof, "
                 "OUTPUT.snapshot-N.pb.gz; README, \"Snapshots while it runs\"); the command never gets it.");
  record->positionals_at_end();

  memtrack::ReportOptions rep;
  std::string report_by = "bytes", report_tree;
  auto* report = app.add_subcommand("report", "Where memory went: per-process figures and allocation sites");
  report->add_option("file", rep.analysis.file, "The artifact")->required();
  std::string format_help = "Output:";
  std::vector<std::string> format_names;
  for (const memtrack::OutputFormat* format : memtrack::output_formats()) {
    format_help += fmt::format("{}\n  {}: {}", format_names.empty() ? "" : ";", format->name, format->summary);
    format_names.emplace_back(format->name);
  }
  report->add_option("--format", rep.format, format_help)->check(CLI::IsMember(format_names))->capture_default_str();
  report->add_option("-o,--output", rep.output, "Write here instead of stdout");
  report->add_option("--top", rep.top, "Allocating functions and call paths shown (0: all)")->capture_default_str();
  report->add_flag("-v,--verbose", rep.verbose,
                   "Text: also the stack outcomes, call paths in full, every process, sizes and recorder counters");
  report->add_flag("--show-runtime-leaks", rep.analysis.show_runtime_leaks,
                   "Count the blocks the C/C++ runtime keeps for the whole process as leaks (docs/REPORT.md)");
  auto* report_by_option = report->add_option(
      "--by", report_by,
      "Rank sites (and weigh folded stacks) by bytes, count, peak, leaked, live_at_end or temporary (--at: peak)")
      ->check(CLI::IsMember({"bytes", "count", "peak", "leaked", "live_at_end", "temporary"}))
      ->capture_default_str();
  report->add_option("--tree", report_tree, "Also show the merged call tree: top-down or bottom-up")
      ->check(CLI::IsMember({"top-down", "bottom-up"}));
  report->add_option("--pid", rep.analysis.pids, "Only allocations of this process (repeatable)");
  report->add_option("--tid", rep.analysis.tids, "Only allocations of this thread (repeatable)");
  report->add_option("--from", rep.analysis.from_s, "Only allocations made at or after this many seconds into the recording");
  report->add_option("--to", rep.analysis.to_s, "Only allocations made at or before this many seconds into the recording");
  report->add_option("--at", rep.analysis.at_s,
                     "What was live this many seconds into the recording: the peak figures of the sites are then "
                     "their bytes live at that moment");
  report->add_option("--function", rep.analysis.function, "Only sites with a frame whose function name contains this");
  report->add_option("--suppressions", rep.analysis.suppressions_file, "LeakSanitizer-style file of leak:PATTERN lines");
  report->add_option("--sysroot", rep.analysis.symbols.sysroot, "Find the recorded files under this directory");
  report->add_option("--modules", rep.analysis.modules_dir,
                     "Symbols and unwind tables written by export-modules, for files missing here");
  report->add_option("--debug-dir", rep.analysis.symbols.debug_dirs,
                     "Also look for separate debug files here (build-id tree or debug links; repeatable)");

  std::string info_file, info_format = "text";
  auto* info = app.add_subcommand("info", "Show an artifact's header, counters and frames; check its integrity");
  info->add_option("file", info_file, "The artifact")->required();
  info->add_option("--format", info_format, "text or json")->check(CLI::IsMember({"text", "json"}));

  std::string dump_file;
  auto* dump = app.add_subcommand("dump", "Print every event of an artifact as one JSON object per line");
  dump->add_option("file", dump_file, "The artifact")->required();

  std::string convert_in, convert_out, convert_layout = "compact";
  auto* convert = app.add_subcommand("convert", "Rewrite an artifact in another layout (records: the seed's, format 2)");
  convert->add_option("in", convert_in, "The artifact")->required();
  convert->add_option("out", convert_out, "The artifact to write")->required();
  convert->add_option("--layout", convert_layout, "compact (format 3, the default) or records (format 2)")
      ->check(CLI::IsMember({"compact", "records"}))
      ->capture_default_str();
  bool convert_aggregate = false;
  convert->add_flag("--aggregate", convert_aggregate,
                    "Keep the figures of the allocations instead of each one, as record --aggregate does");

  std::string export_file, export_dir;
  auto* export_modules = app.add_subcommand(
      "export-modules", "Write the symbols, CFI and placements of every mapped file, for offline unwinding");
  export_modules->add_option("file", export_file, "The artifact")->required();
  export_modules->add_option("dir", export_dir, "Directory to write into (created if missing)")->required();

  memtrack::DiffOptions diff_opts, check_opts;
  std::string diff_by = "bytes";
  auto* diff = app.add_subcommand("diff", "Compare two recordings; fail when a budget breaks (--fail-if)");
  diff->add_option("base", diff_opts.base, "The base recording")->required();
  diff->add_option("head", diff_opts.head, "The recording compared with it")->required();
  auto* check = app.add_subcommand("check", "Test one recording against memory budgets (--max)");
  check->add_option("file", check_opts.head, "The recording")->required();
  for (auto [command, opts] : {std::pair{diff, &diff_opts}, std::pair{check, &check_opts}}) {
    std::vector<std::string> names;
    std::string help;
    for (const memtrack::DiffOutputFormat* format : memtrack::diff_output_formats()) {
      names.emplace_back(format->name);
      help += (help.empty() ? "" : "; ") + std::string(format->name) + ": " + std::string(format->summary);
    }
    command->add_option("--format", opts->format, help)->check(CLI::IsMember(names));
    command->add_option("-o,--output", opts->output, "Write here instead of stdout");
    command->add_option("--fail-if", opts->fail_if,
                        "A budget broken when it holds, e.g. 'peak>+5%', 'leaked>0' (repeatable; docs/REPORT.md)");
    command->add_option("--max", opts->max, "A budget broken when it does not hold, e.g. 'peak<=64MiB' (repeatable)");
    command->add_option("--suppressions", opts->analysis.suppressions_file, "LeakSanitizer-style file of leak:PATTERN lines");
    command->add_flag("--show-runtime-leaks", opts->analysis.show_runtime_leaks,
                      "Count the blocks the C/C++ runtime keeps for the whole process as leaks");
    command->add_option("--sysroot", opts->analysis.symbols.sysroot, "Find the recorded files under this directory");
    command->add_option("--modules", opts->analysis.modules_dir,
                        "Symbols and unwind tables written by export-modules, for files missing here");
    command->add_option("--debug-dir", opts->analysis.symbols.debug_dirs, "Also look for separate debug files here");
  }
  diff->add_option("--by", diff_by, "Rank changed call paths by bytes, count, peak, leaked, live_at_end or temporary")
      ->check(CLI::IsMember({"bytes", "count", "peak", "leaked", "live_at_end", "temporary"}))
      ->capture_default_str();
  diff->add_option("--top", diff_opts.top, "Changed call paths shown (0: all)")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints the help, the version or the error
    if (code == 0) return status::kOk;
    return record->parsed() ? status::kRecordFailed : status::kUsage;
  }
  if (*record) {
    if (rec.attach_pid == 0 && rec.command.empty()) {
      std::cerr << "memtrack record: give a command after --, or --pid PID\n";
      return status::kRecordFailed;
    }
    if (rec.attach_pid != 0 && !rec.command.empty()) {
      std::cerr << "memtrack record: give either a command or --pid, not both\n";
      return status::kRecordFailed;
    }
    rec.event_ring_bytes = static_cast<uint64_t>(ring_mib * 1024 * 1024);
    rec.stack_ring_bytes = static_cast<uint64_t>(stack_ring_mib * 1024 * 1024);
    rec.stack_mode = no_stacks ? memtrack::StackMode::Off
                   : stack_mode == "raw" ? memtrack::StackMode::Raw
                                         : memtrack::StackMode::Walk;
    rec.hold = hold == "ptrace" ? memtrack::HoldMode::Ptrace : memtrack::HoldMode::Signal;
    rec.memory_records = !no_memory;
    if (records_layout) rec.layout = memtrack::ArtifactLayout::Records;
    if (aggregate) {
      rec.aggregator = [](const memtrack::ArtifactHeader& header) {
        return std::make_shared<memtrack::HeapAggregator>(header.start_monotonic_ns,
                                                          memtrack::recording_attached(header));
      };
    }
    rec.unwind_cache = !no_unwind_cache;
    try {
      for (const std::string& text : snapshot_when) {
        rec.snapshots.when.push_back(memtrack::parse_snapshot_condition(text));
        if (rec.snapshots.when.back().figure == memtrack::SnapshotCondition::Figure::Heap && records_layout)
          throw std::invalid_argument("--snapshot-when " + text + ": the heap is counted by the compact layout's "
                                      "writer: not with --records-layout");
      }
    } catch (const std::invalid_argument& e) {
      std::cerr << "memtrack record: " << e.what() << "\n";
      return status::kRecordFailed;
    }
    // Delivered through sigtimedwait: forwarded to the target, ending an
    // attach, or asking for a snapshot.
    sigset_t handled;
    sigemptyset(&handled);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, memtrack::kSnapshotSignal}) sigaddset(&handled, s);
    pthread_sigmask(SIG_BLOCK, &handled, nullptr);
    try {
      return memtrack::record(rec);
    } catch (const std::exception& e) {
      return record_failure(e);
    }
  }
  try {
    if (*report) {
      memtrack::cost_kind_from_name(report_by, &rep.by);
      if (rep.analysis.at_s && report_by_option->count() == 0) rep.by = memtrack::CostKind::Peak;
      if (report_tree == "top-down") rep.tree = memtrack::TreeDirection::TopDown;
      if (report_tree == "bottom-up") rep.tree = memtrack::TreeDirection::BottomUp;
      return memtrack::run_report(rep);
    }
    if (*diff) {
      memtrack::cost_kind_from_name(diff_by, &diff_opts.by);
      return memtrack::run_diff(diff_opts);
    }
    if (*check) return memtrack::run_check(check_opts);
    if (*info) return memtrack::run_info(info_file, info_format, std::cout);
    if (*dump) return memtrack::run_dump(dump_file, std::cout);
    if (*convert) {
      return memtrack::run_convert(convert_in, convert_out,
                                   convert_layout == "records" ? memtrack::ArtifactLayout::Records
                                                               : memtrack::ArtifactLayout::Compact,
                                   convert_aggregate, std::cerr);
    }
    if (*export_modules) return memtrack::run_export_modules(export_file, export_dir, std::cout, std::cerr);
  } catch (const std::exception& e) {
    std::cerr << "memtrack: " << e.what() << "\n";
    return status::kNoOutput;
  }
  return status::kUsage;  // require_subcommand(1): not reached
}
