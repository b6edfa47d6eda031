#include <set>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "output/json_output.h"
#include "output/text/text_output.h"
#include "output/text/text_writer.h"
#include "output/text/units.h"
#include "support/trace_builder.h"

namespace memtrack {
namespace {

using nlohmann::json;
using testing::TraceBuilder;

constexpr int32_t kServer = 4100;
constexpr int32_t kShell = 4101;
constexpr int32_t kKilled = 4102;
constexpr int32_t kAttached = 4200;

// A server that allocates from 4 threads, forks a shell and a child that is
// killed, and exits, plus a process seen only mid-run that runs on; losses
// and reader warnings.
TraceBuilder realistic_trace() {
  TraceBuilder trace;
  trace.exec(kServer,
             {"/usr/local/bin/inventory-server", "--config", "/etc/inventory/production.yaml",
              "--threads", "4", "--verbose"},
             "/usr/local/bin/inventory-server", "inventory-serve");
  for (uint64_t i = 0; i < 400; ++i) {
    int32_t tid = kServer + static_cast<int32_t>(i % 4);
    uint64_t addr = 0x10000 + i * 0x1000;
    trace.malloc(kServer, tid, addr, 24 + i * 37);
    if (i % 3 != 0) trace.free(kServer, tid, addr);
  }
  trace.calloc(kServer, kServer, 0x900000, 3 << 20).realloc(kServer, kServer, 0, 0x990000, 4096);
  trace.fork(kServer, kShell)
      .exec(kShell, {"/bin/sh", "-c", "echo done\nrm -rf /tmp/x"}, "/bin/sh", "sh")
      .malloc(kShell, kShell, 0x5000, 100)
      .free(kShell, kShell, 0x5000)
      .exit(kShell, 0);
  trace.fork(kServer, kKilled).malloc(kKilled, kKilled, 0x6000, 1 << 20).exit(kKilled, 9);
  trace.free(kAttached, kAttached, 0x7000).aligned_alloc(kAttached, kAttached, 0x8000, 64);
  trace.exit(kServer, 2 << 8);
  return trace;
}

ArtifactTrailer lossy_trailer() {
  ArtifactTrailer trailer;
  trailer.counters = {{"ring_lost", 12},
                      {"stack_dropped", 0},
                      {"events_written", 123456},
                      {"a_very_long_counter_name_for_the_per_cpu_ring_buffer_overflow_lost", 5}};
  trailer.exit_status = 2 << 8;
  return trailer;
}

Report realistic_report() {
  return realistic_trace().report(
      lossy_trailer(),
      {"the artifact ends in a truncated frame after 1234567 events; the last partial frame "
       "of 4096 bytes was ignored and its events are missing from this report"});
}

std::string text_of(const Report& report, bool color, bool verbose = false) {
  std::ostringstream out;
  write_text_report(report, out, {color, verbose});
  return out.str();
}

json json_of(const Report& report) {
  std::ostringstream out;
  write_json_report(report, out);
  return json::parse(out.str());
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string strip_ansi(const std::string& text) {
  std::string plain;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b') {
      i = text.find('m', i);  // the end of "\x1b[...m"
      if (i == std::string::npos) break;
      continue;
    }
    plain += text[i];
  }
  return plain;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(TextOutput, EveryLineFitsEightyColumns) {
  for (bool verbose : {false, true}) {
    std::string text = text_of(realistic_report(), false, verbose);
    std::vector<std::string> lines = lines_of(text);
    ASSERT_GT(lines.size(), verbose ? 30u : 15u);
    for (const std::string& line : lines) EXPECT_LE(line.size(), 80u) << line;
  }
}

// The default is a summary; the histogram and the counters come with
// --verbose, the counters also whenever something was lost.
TEST(TextOutput, TablesOnlyWhenVerboseCountersWhenLost) {
  TraceBuilder trace;
  trace.malloc(1, 1, 0x1000, 10);
  ArtifactTrailer trailer;
  trailer.counters = {{"ring_lost", 0}, {"events_written", 1}};
  std::string brief = text_of(trace.report(trailer), false);
  EXPECT_FALSE(contains(brief, "Allocation sizes")) << brief;
  EXPECT_FALSE(contains(brief, "Recorder counters")) << brief;
  EXPECT_FALSE(contains(brief, "Processes")) << "one process: the header says it all\n" << brief;
  std::string verbose = text_of(trace.report(trailer), false, true);
  EXPECT_TRUE(contains(verbose, "Allocation sizes")) << verbose;
  EXPECT_TRUE(contains(verbose, "Recorder counters")) << verbose;
  EXPECT_TRUE(contains(verbose, "Processes: heap")) << verbose;
  EXPECT_TRUE(contains(text_of(realistic_report(), false), "Recorder counters")) << "events were lost";
}

TEST(TextOutput, ExactBytesBesideTheRoundedUnit) {
  TraceBuilder trace;
  trace.malloc(1, 1, 0x1000, 1'234'567);
  std::string text = text_of(trace.report(), false);
  EXPECT_TRUE(contains(text, "1.18 MiB  (1,234,567 B), average 1.18 MiB")) << text;
  EXPECT_TRUE(contains(text, "1.18 MiB  (1,234,567 B), in 1 block")) << text;
}

TEST(TextOutput, HugeFiguresStillFitEightyColumns) {
  Report report = realistic_report();
  for (ProcessReport& process : report.processes) {
    process.parent_pid = -2147483647;
    process.exit_code = 0x7f7f7f7f;
    process.figures.calls.malloc = UINT64_MAX / 8;
    process.figures.free_calls = UINT64_MAX;
    process.figures.total_allocated = UINT64_MAX;
    process.figures.peak_memory = UINT64_MAX;
    process.figures.leaked_bytes = UINT64_MAX;
    process.figures.duration_ns = UINT64_MAX;
    process.figures.temporary_allocations = UINT64_MAX;
    process.figures.unmatched_frees = UINT64_MAX;
    process.figures.threads = UINT64_MAX;
  }
  report.totals = report.processes.front().figures;
  report.totals.peak_time_ns = UINT64_MAX;
  report.totals.histogram.add(UINT64_MAX);
  for (bool verbose : {false, true})
    for (const std::string& line : lines_of(text_of(report, false, verbose))) EXPECT_LE(line.size(), 80u) << line;
}

TEST(TextOutput, ShowsTheKeyFigures) {
  Report report = realistic_report();
  std::string text = text_of(report, false);
  EXPECT_TRUE(contains(text, "./app --serve")) << text;
  // The table drops argv[0]'s directory (and the parent column, to show
  // the blocks live at the end of kAttached, which runs on).
  EXPECT_TRUE(contains(text, "  inventory-serv")) << text;
  EXPECT_TRUE(contains(text, "LIVE@END")) << text;
  EXPECT_TRUE(contains(text, "running")) << text;
  EXPECT_TRUE(contains(text, "testhost, kernel 6.1.0-test"));
  EXPECT_TRUE(contains(text, "2023-11-14 22:13:20 UTC"));
  EXPECT_TRUE(contains(text, format_bytes(report.totals.total_allocated)));
  EXPECT_TRUE(contains(text, format_bytes(report.totals.peak_memory)));
  EXPECT_TRUE(contains(text, format_bytes(report.totals.leaked_bytes)));
  EXPECT_TRUE(contains(text, format_thousands(report.totals.alloc_calls())));
  EXPECT_TRUE(contains(text, "exit 2"));    // the recorded command
  EXPECT_TRUE(contains(text, "signal 9"));  // the killed child
  for (int32_t pid : {kServer, kShell, kKilled, kAttached}) {
    EXPECT_TRUE(contains(text, std::to_string(pid))) << pid;
  }
  EXPECT_TRUE(contains(text, "WARNING: 17 events lost:"));
  EXPECT_TRUE(contains(text, "ring_lost=12"));
  EXPECT_FALSE(contains(text, "stack_dropped=0"));  // only nonzero losses in the warning
  EXPECT_TRUE(contains(text, "events_written"));     // but every counter is listed
  EXPECT_TRUE(contains(text, "truncated frame"));
}

TEST(TextOutput, ControlCharactersInACommandDoNotBreakLines) {
  TraceBuilder trace;
  trace.exec(1, {"sh", "-c", "a\nb\x1b[2J"}).exit(1, 0);
  std::string text = text_of(trace.report(), false, true);
  EXPECT_TRUE(contains(text, "sh -c a?b?[2J")) << text;
  EXPECT_FALSE(contains(text, "\x1b"));
}

// Attached to a running process, stopped while it runs on: the header says
// what the recording cannot know, the totals count frees of earlier blocks
// and blocks live at end apart; a command recorded to its end says nothing.
TEST(TextOutput, SaysWhatARecordingThatEndsBeforeTheProcessCannotKnow) {
  TraceBuilder attached;
  attached.introduce(1).free(1, 1, 0x9000).malloc(1, 1, 0x1000, 4096);
  std::string text = text_of(attached.report(), false);
  for (const char* words :
       {"  cannot know attached to running processes: blocks they allocated before", "  cannot know the recording ended before the process",
        "  exit        none: the process ran on after the recording", "  freed, allocated before            1",
        "4.00 KiB  (4,096 B), in 1 block, not leaks", "0 B  in 0 blocks"})
    EXPECT_TRUE(contains(text, words)) << words << "\n" << text;
  for (const std::string& line : lines_of(text)) EXPECT_LE(line.size(), 80u) << line;

  TraceBuilder command;
  command.exec(1, {"./app"}).malloc(1, 1, 0x1000, 4096).exit(1, 0);
  std::string ended = text_of(command.report(), false);
  EXPECT_FALSE(contains(ended, "cannot know")) << ended;
  EXPECT_FALSE(contains(ended, "live at end")) << ended;
  EXPECT_FALSE(contains(ended, "freed, allocated before")) << ended;
  EXPECT_TRUE(std::regex_search(ended, std::regex("\n  leaked +4\\.00 KiB"))) << ended;
}

TEST(TextOutput, SaysExplicitlyThatNoEventsWereLost) {
  TraceBuilder trace;
  trace.malloc(1, 1, 0x1000, 10);
  ArtifactTrailer trailer;
  trailer.counters = {{"ring_lost", 0}, {"events_written", 1}};
  std::string text = text_of(trace.report(trailer), false);
  EXPECT_TRUE(contains(text, "\nlost events: 0\n")) << text;
  EXPECT_FALSE(contains(text, "WARNING"));
}

// Loss counters of a damaged or forged trailer never wrap around to a small
// sum (two of 2^63 would read as 0 lost).
TEST(TextOutput, LossCountersSumWithoutWrappingAround) {
  EXPECT_EQ(sum_loss_counters({{"a_lost", uint64_t{1} << 63}, {"b_dropped", uint64_t{1} << 63}, {"c_lost", 5}}),
            UINT64_MAX);
  EXPECT_EQ(sum_loss_counters({{"a_lost", 2}, {"b_dropped", 3}, {"events", UINT64_MAX}}), 5u);
}

TEST(TextOutput, WarnsThatLossesAreUnknownWithoutATrailer) {
  TraceBuilder trace;
  trace.malloc(1, 1, 0x1000, 10);
  std::string text = text_of(trace.report(std::nullopt), false);
  EXPECT_TRUE(contains(text, "WARNING: lost events unknown")) << text;
  EXPECT_TRUE(contains(text, "not finalized"));
  EXPECT_FALSE(contains(text, "Recorder counters"));
}

// A fast-path recording cut short lost the records that say which processes
// its interposer served: the report does not call them uprobe processes.
TEST(TextOutput, HowAProcessWasRecordedIsUnknownWithoutATrailer) {
  TraceBuilder trace;
  trace.malloc(1, 1, 0x1000, 10);
  Report report = trace.report(std::nullopt);
  report.header.features.push_back("interposer");
  std::string text = text_of(report, false);
  EXPECT_TRUE(contains(text, "recorded by unknown for 1 of 1 process (the recording was not finalized)")) << text;
  EXPECT_FALSE(contains(text, "uprobes (a kernel entry per allocator call)")) << text;
  report = trace.report();
  report.header.features.push_back("interposer");
  EXPECT_TRUE(contains(text_of(report, false), "uprobes (a kernel entry per allocator call)"))
      << "finalized: the records are all there";
}

// A long field wraps at words: no figure is ever cut.
TEST(TextOutput, LongFieldsWrapWithoutCuttingAFigure) {
  std::ostringstream out;
  text::TextWriter w(out, false);
  w.field("RSS peak", "34.89 MiB at 48.54 ms (anon 32.57 MiB, file 2.79 MiB, shmem 76.00 KiB) and more words");
  std::string text = out.str();
  for (const char* figure : {"34.89 MiB", "32.57 MiB", "2.79 MiB", "76.00 KiB)"})
    EXPECT_TRUE(contains(text, figure)) << figure << " in:\n" << text;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), text::kLineWidth) << line;
  EXPECT_FALSE(contains(text, "...")) << text;
}

TEST(TextOutput, SaysSoWhenNothingWasAllocated) {
  TraceBuilder trace;
  trace.exit(1, 0);
  EXPECT_TRUE(contains(text_of(trace.report(), false, true), "(no allocations)"));
}

TEST(TextOutput, ColorOnlyWhenAskedAndItChangesNothingElse) {
  Report report = realistic_report();
  std::string plain = text_of(report, false);
  std::string colored = text_of(report, true);
  EXPECT_FALSE(contains(plain, "\x1b"));
  EXPECT_TRUE(contains(colored, "\x1b["));
  EXPECT_EQ(strip_ansi(colored), plain);
}

const std::set<std::string> kFigureKeys = {
    "pid", "parent_pid", "command", "exe", "start_time_ns", "exit_code", "alloc_calls",
    "calls_by_kind", "realloc_calls", "free_calls", "unmatched_frees", "total_allocated",
    "average_allocation_size", "peak_memory", "peak_time_ns", "leaked_bytes", "leaked_count",
    "runtime_held_bytes", "runtime_held_count", "suppressed_leaked_bytes", "suppressed_leaked_count",
    "inherited_unfreed_bytes", "inherited_unfreed_count", "temporary_allocations", "histogram",
    "duration_ns", "threads", "recorded_by", "frees_of_earlier_blocks", "live_at_end_bytes", "live_at_end_count",
    "running_at_end"};

std::set<std::string> keys_of(const json& object) {
  std::set<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.insert(key);
  return keys;
}

TEST(JsonOutput, HasExactlyTheDocumentedKeys) {
  json doc = json_of(realistic_report());
  EXPECT_EQ(keys_of(doc), (std::set<std::string>{"format_version", "header", "events", "attached",
                                                 "recording_limits", "processes", "totals", "lost_events",
                                                 "counters", "warnings"}));
  EXPECT_EQ(keys_of(doc["header"]),
            (std::set<std::string>{"artifact_format_version", "recorder_version", "features",
                                   "command", "host", "kernel", "clock", "start_monotonic_ns",
                                   "start_realtime_ns", "page_size", "kernel_fallbacks"}));
  ASSERT_EQ(doc["processes"].size(), 4u);
  for (const json& process : doc["processes"]) EXPECT_EQ(keys_of(process), kFigureKeys);
  EXPECT_EQ(keys_of(doc["totals"]), kFigureKeys);
  EXPECT_EQ(keys_of(doc["totals"]["calls_by_kind"]),
            (std::set<std::string>{"malloc", "calloc", "realloc", "aligned_alloc"}));
}

TEST(JsonOutput, TopLevelValues) {
  Report report = realistic_report();
  json doc = json_of(report);
  EXPECT_EQ(doc["format_version"], 1);
  EXPECT_EQ(doc["events"], report.events);
  EXPECT_EQ(doc["lost_events"], 17);
  EXPECT_EQ(doc["counters"]["events_written"], 123456);
  EXPECT_EQ(doc["counters"].size(), 4u);
  EXPECT_EQ(doc["warnings"].size(), 1u);
  EXPECT_EQ(doc["header"]["command"], (json{"./app", "--serve"}));
  EXPECT_EQ(doc["header"]["host"], "testhost");
  EXPECT_EQ(doc["header"]["start_monotonic_ns"], TraceBuilder::kStartNs);
}

TEST(JsonOutput, ProcessValues) {
  TraceBuilder trace;
  trace.exec(7, {"./worker", "-n", "2"}, "/opt/worker", "worker")
      .malloc(7, 7, 0x1000, 100)
      .malloc(7, 8, 0x2000, 300)
      .free(7, 7, 0x1000)
      .realloc(7, 8, 0x2000, 0x3000, 20)
      .free(7, 7, 0x9999);
  uint64_t last_offset = trace.last_offset_ns();
  trace.fork(7, 9).exit(9, 1 << 8);
  json doc = json_of(trace.report());
  const json& worker = doc["processes"][0];
  EXPECT_EQ(worker["pid"], 7);
  EXPECT_EQ(worker["parent_pid"], nullptr);
  EXPECT_EQ(worker["command"], "./worker -n 2");
  EXPECT_EQ(worker["exe"], "/opt/worker");
  EXPECT_EQ(worker["exit_code"], nullptr);
  EXPECT_EQ(worker["alloc_calls"], 3);
  EXPECT_EQ(worker["calls_by_kind"], (json{{"malloc", 2}, {"calloc", 0}, {"realloc", 1},
                                           {"aligned_alloc", 0}}));
  EXPECT_EQ(worker["realloc_calls"], 1);
  EXPECT_EQ(worker["free_calls"], 2);
  EXPECT_EQ(worker["unmatched_frees"], 1);
  EXPECT_EQ(worker["total_allocated"], 420);
  EXPECT_DOUBLE_EQ(worker["average_allocation_size"].get<double>(), 140.0);
  EXPECT_EQ(worker["peak_memory"], 400);
  EXPECT_EQ(worker["peak_time_ns"], 3 * TraceBuilder::kStepNs);
  EXPECT_EQ(worker["leaked_bytes"], 0);  // it runs on: its block is live at end
  EXPECT_EQ(worker["live_at_end_bytes"], 20);
  EXPECT_EQ(worker["live_at_end_count"], 1);
  EXPECT_EQ(worker["running_at_end"], true);
  EXPECT_EQ(worker["temporary_allocations"], 1);  // 0x1000: tid 7 allocated nothing after it
  EXPECT_EQ(worker["threads"], 2);
  EXPECT_EQ(worker["start_time_ns"], TraceBuilder::kStepNs);
  EXPECT_EQ(worker["duration_ns"], last_offset - TraceBuilder::kStepNs);  // exec to last record

  const json& child = doc["processes"][1];
  EXPECT_EQ(child["parent_pid"], 7);
  EXPECT_EQ(child["exit_code"], 256);
  EXPECT_EQ(child["inherited_unfreed_bytes"], 20);
  EXPECT_EQ(child["inherited_unfreed_count"], 1);
  EXPECT_EQ(child["leaked_bytes"], 0);
  EXPECT_EQ(child["running_at_end"], false);

  const json& totals = doc["totals"];
  EXPECT_EQ(totals["pid"], nullptr);
  EXPECT_EQ(totals["parent_pid"], nullptr);
  EXPECT_EQ(totals["exe"], nullptr);
  EXPECT_EQ(totals["command"], "./app --serve");
  EXPECT_EQ(totals["exit_code"], 0);  // the trailer's exit_status
  EXPECT_EQ(totals["peak_memory"], 400);
  EXPECT_EQ(totals["leaked_bytes"], 0);
  EXPECT_EQ(totals["live_at_end_bytes"], 20);
  EXPECT_EQ(totals["running_at_end"], nullptr);
  EXPECT_EQ(doc["attached"], false);
  EXPECT_EQ(doc["recording_limits"].size(), 1u) << "the recording ended before the worker";
}

TEST(JsonOutput, HistogramListsEveryBucket) {
  TraceBuilder trace;
  trace.malloc(1, 1, 0x1000, 8).malloc(1, 1, 0x2000, 9).malloc(1, 1, 0x3000, uint64_t{2} << 30);
  const json histogram = json_of(trace.report())["processes"][0]["histogram"];
  ASSERT_EQ(histogram.size(), SizeHistogram::kBucketCount);
  EXPECT_EQ(histogram[0], (json{{"min", 0}, {"max", 8}, {"count", 1}}));
  EXPECT_EQ(histogram[1], (json{{"min", 9}, {"max", 16}, {"count", 1}}));
  EXPECT_EQ(histogram[2]["count"], 0);
  EXPECT_EQ(histogram.back(), (json{{"min", (uint64_t{1} << 30) + 1}, {"max", nullptr},
                                    {"count", 1}}));
}

TEST(JsonOutput, UnknownLossesAreNull) {
  TraceBuilder trace;
  trace.malloc(1, 1, 0x1000, 10);
  json doc = json_of(trace.report(std::nullopt));
  EXPECT_EQ(doc["lost_events"], nullptr);
  EXPECT_EQ(doc["counters"], nullptr);
  EXPECT_EQ(doc["totals"]["exit_code"], nullptr);
  ASSERT_EQ(doc["warnings"].size(), 1u);
  EXPECT_NE(doc["warnings"][0].get<std::string>().find("not finalized"), std::string::npos);
}

TEST(JsonOutput, InvalidUtf8InACommandIsReplacedNotFatal) {
  TraceBuilder trace;
  trace.exec(1, {"./bad\xff\xfe-name"});
  json doc = json_of(trace.report());
  EXPECT_EQ(doc["processes"][0]["command"], "./bad\xEF\xBF\xBD\xEF\xBF\xBD-name");
}

}  // namespace
}  // namespace memtrack
