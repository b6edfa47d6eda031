// The analysis of a whole artifact (analyze/recording_analysis.h) on a
// hand-made recording: heap figures per process, the filters the sites and
// the timeline count, progress, and the inputs it refuses.
#include "analyze/recording_analysis.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "analyze/heap_aggregate.h"
#include "format/artifact.h"

namespace memtrack {
namespace {

constexpr uint64_t kStart = 1'000'000'000;
constexpr uint64_t kMs = 1'000'000;

Event event(EventType type, int32_t pid, uint64_t ms) {
  Event e;
  e.type = type;
  e.pid = e.tid = pid;
  e.timestamp = kStart + ms * kMs;
  return e;
}

// Process 100 allocates 3 blocks of 100 bytes at 10, 20 and 30 ms and frees
// the first; process 101 allocates one of 1000 bytes at 500 ms and leaks it;
// both exit at 900 ms.
class RecordingAnalysis : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = (std::filesystem::temp_directory_path() /
             ("memtrack-recording-analysis-" + std::to_string(getpid()) + ".zst"))
                .string();
    std::vector<Event> events;
    events.push_back(event(EventType::Fork, 101, 5));
    events.back().parent_pid = 100;
    for (uint64_t i = 1; i <= 3; ++i) {
      events.push_back(event(EventType::Malloc, 100, 10 * i));
      events.back().addr = 0x1000 * i;
      events.back().size = 100;
    }
    events.push_back(event(EventType::Free, 100, 40));
    events.back().addr = 0x1000;
    events.push_back(event(EventType::Malloc, 101, 500));
    events.back().addr = 0x9000;
    events.back().size = 1000;
    for (int32_t pid : {101, 100}) events.push_back(event(EventType::Exit, pid, 900));
    events_ = events;
    write(file_, {});
  }
  void TearDown() override {
    for (const std::string& file : {file_, aggregated_file(), aggregated_file() + ".killed",
                                    checkpoint_path(aggregated_file() + ".killed")})
      std::filesystem::remove(file);
  }

  static ArtifactHeader header() {
    ArtifactHeader header;
    header.command = {"fixture"};
    header.start_monotonic_ns = kStart;
    header.page_size = 4096;
    return header;
  }
  void write(const std::string& path, WriterOptions writer_options) const {
    ArtifactWriter writer(path, header(), std::move(writer_options));
    writer.append(events_);
    ArtifactTrailer trailer;
    trailer.end_monotonic_ns = kStart + 1000 * kMs;
    trailer.counters = {{"events_lost", 0}};
    writer.finish(trailer);
  }
  std::string aggregated_file() const { return file_ + ".aggregated"; }
  // The recording as `record --aggregate` writes it (the recorder's layout).
  void write_aggregated() const {
    write(aggregated_file(), {.layout = ArtifactLayout::Compact,
                              .aggregator = std::make_shared<HeapAggregator>(kStart, false)});
  }

  AnalysisOptions options() const {
    AnalysisOptions o;
    o.file = file_;
    return o;
  }

  std::string file_;
  std::vector<Event> events_;
};

TEST_F(RecordingAnalysis, HeapFiguresPerProcessAndTheSitesTotals) {
  AnalyzedRecording run = analyze_recording(options());
  EXPECT_FALSE(run.damaged());
  ASSERT_EQ(run.report.processes.size(), 2u);
  EXPECT_EQ(run.report.totals.alloc_calls(), 4u);
  EXPECT_EQ(run.report.totals.leaked_bytes, 1200u);
  EXPECT_EQ(run.profile.totals.allocations, 4u);
  EXPECT_EQ(run.profile.totals.allocated_bytes, 1300u);
  EXPECT_EQ(run.profile.duration_ns, 1000 * kMs);
  EXPECT_EQ(run.profile.command, "fixture");
}

TEST_F(RecordingAnalysis, FiltersSelectWhatTheSitesCountNotTheHeapFigures) {
  AnalysisOptions by_pid = options();
  by_pid.pids = {101};
  AnalyzedRecording run = analyze_recording(by_pid);
  EXPECT_EQ(run.report.totals.alloc_calls(), 4u);
  EXPECT_EQ(run.profile.totals.allocations, 1u);
  EXPECT_EQ(run.profile.totals.allocated_bytes, 1000u);

  AnalysisOptions window = options();
  window.from_s = 0.015;
  window.to_s = 0.035;
  run = analyze_recording(window);
  EXPECT_EQ(run.profile.totals.allocations, 2u);
}

TEST_F(RecordingAnalysis, HeapFiguresOnlyWithoutCallPaths) {
  AnalysisOptions heap_only = options();
  heap_only.call_paths = false;
  AnalyzedRecording run = analyze_recording(heap_only);
  EXPECT_EQ(run.report.totals.alloc_calls(), 4u);
  EXPECT_EQ(run.profile.totals.allocations, 0u);
}

TEST_F(RecordingAnalysis, ToldWhenTheReadingIsDone) {
  AnalysisOptions told = options();
  int done = 0, batches = 0;
  told.progress.reading_done = [&] { ++done; };
  told.progress.events_read = [&](uint64_t) { ++batches; };  // every 2^20 events: not here
  analyze_recording(told);
  EXPECT_EQ(done, 1);
  EXPECT_EQ(batches, 0);
}

TEST_F(RecordingAnalysis, RefusesAMissingFileAndNegativeTimes) {
  AnalysisOptions missing = options();
  missing.file += ".missing";
  EXPECT_THROW(analyze_recording(missing), std::runtime_error);
  AnalysisOptions before_start = options();
  before_start.at_s = -1;
  EXPECT_THROW(analyze_recording(before_start), std::runtime_error);
}

// The figures a report shows of an analysed recording, as one string.
std::string figures_of(const AnalyzedRecording& run) {
  std::string out;
  auto add = [&](const char* name, uint64_t value) { out += std::string(name) + "=" + std::to_string(value) + " "; };
  const HeapFigures& t = run.report.totals;
  add("calls", t.alloc_calls());
  add("allocated", t.total_allocated);
  add("frees", t.free_calls);
  add("temporary", t.temporary_allocations);
  add("peak", t.peak_memory);
  add("peak_at", t.peak_time_ns.value_or(0));
  add("leaked", t.leaked_bytes);
  add("leaks", t.leaked_count);
  for (const ProcessReport& p : run.report.processes) {
    add("pid", static_cast<uint64_t>(p.pid));
    add("peak", p.figures.peak_memory);
    add("peak_at", p.figures.peak_time_ns.value_or(0));
    add("leaked", p.figures.leaked_bytes);
  }
  add("sites", run.profile.sites.size());
  add("sites_peak_at", run.profile.peak_time_ns);
  for (const ProfileSite& site : run.profile.sites) {
    add("allocations", site.costs.allocations);
    add("bytes", site.costs.allocated_bytes);
    add("peak_bytes", site.costs.peak_bytes);
    add("leaked", site.costs.leaked_bytes);
  }
  add("buckets", run.timeline.total.buckets.size());
  for (const TimelineBucket& bucket : run.timeline.total.buckets) add("live", bucket.max[0]);
  return out;
}

TEST_F(RecordingAnalysis, AnAggregatedRecordingHasTheWholeRecordingsFigures) {
  write_aggregated();
  AnalysisOptions aggregated = options();
  aggregated.file = aggregated_file();
  AnalyzedRecording whole = analyze_recording(options()), restored = analyze_recording(aggregated);
  EXPECT_FALSE(restored.damaged()) << (restored.read_warnings.empty() ? "" : restored.read_warnings[0]);
  EXPECT_EQ(figures_of(restored), figures_of(whole));
  EXPECT_EQ(restored.report.totals.leaked_bytes, 1200u);
  // It keeps no allocation record: a file that grows with call paths, not calls.
  uint64_t allocation_records = 0;
  read_artifact(aggregated_file(), [&](const Event& e) { allocation_records += is_allocation(e.type) || e.type == EventType::Free; });
  EXPECT_EQ(allocation_records, 0u);
}

TEST_F(RecordingAnalysis, AnAggregatedRecordingRefusesWhatNeedsItsEvents) {
  write_aggregated();
  for (auto pick : std::vector<std::function<void(AnalysisOptions&)>>{
           [](AnalysisOptions& o) { o.pids = {100}; }, [](AnalysisOptions& o) { o.tids = {100}; },
           [](AnalysisOptions& o) { o.from_s = 0.1; }, [](AnalysisOptions& o) { o.to_s = 0.1; },
           [](AnalysisOptions& o) { o.at_s = 0.1; }}) {
    AnalysisOptions o = options();
    o.file = aggregated_file();
    pick(o);
    try {
      analyze_recording(o);
      ADD_FAILURE() << "an event option was not refused";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("record without --aggregate"), std::string::npos) << e.what();
    }
  }
}

TEST_F(RecordingAnalysis, AnAggregatedRecordingCutBeforeItsFiguresSaysSo) {
  // What a killed recorder leaves: every frame written, no Aggregate record.
  {
    ArtifactWriter writer(aggregated_file(), header(),
                          {.layout = ArtifactLayout::Compact, .aggregator = std::make_shared<HeapAggregator>(kStart, false)});
    writer.append(events_);
    writer.flush();
    std::filesystem::copy_file(writer.file_path(), aggregated_file() + ".killed");
  }
  AnalysisOptions killed = options();
  killed.file = aggregated_file() + ".killed";
  AnalyzedRecording run = analyze_recording(killed);
  std::string warnings;
  for (const std::string& warning : run.report.warnings) warnings += warning + "\n";
  EXPECT_NE(warnings.find(": no heap figures: no Aggregate records: the recording ended before memtrack wrote its figures"),
            std::string::npos)
      << warnings;
  EXPECT_EQ(run.report.totals.alloc_calls(), 0u);
}

// The same with the checkpoint the killed recorder left (record --aggregate
// --checkpoint-every): its figures, said to be so; a checkpoint of another
// recording is refused by name.
TEST_F(RecordingAnalysis, AnAggregatedRecordingCutBeforeItsFiguresReportsItsLastCheckpoint) {
  const std::string killed = aggregated_file() + ".killed";
  {
    ArtifactWriter writer(aggregated_file(), header(),
                          {.layout = ArtifactLayout::Compact,
                           .aggregator = std::make_shared<HeapAggregator>(kStart, false),
                           .checkpoint_interval = std::chrono::milliseconds(20)});
    writer.publish();
    // Up to 30 ms: process 100's three blocks live, then its checkpoint.
    writer.append(std::span<const Event>(events_).first(4));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!std::filesystem::exists(checkpoint_path(aggregated_file())) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(std::filesystem::copy_file(checkpoint_path(aggregated_file()), checkpoint_path(killed)));
    writer.append(std::span<const Event>(events_).subspan(4));
    writer.flush();
    std::filesystem::copy_file(writer.file_path(), killed);
  }
  AnalysisOptions o = options();
  o.file = killed;
  AnalyzedRecording run = analyze_recording(o);
  std::string warnings;
  for (const std::string& warning : run.report.warnings) warnings += warning + "\n";
  EXPECT_NE(warnings.find(": the recording ended before memtrack wrote its figures: the heap figures are those of "
                          "its last checkpoint"),
            std::string::npos)
      << warnings;
  EXPECT_EQ(run.report.totals.alloc_calls(), 3u);
  EXPECT_EQ(run.report.totals.live_at_end_bytes, 300u);
  EXPECT_EQ(run.report.totals.leaked_bytes, 0u);

  // Another recording's checkpoint under that name.
  {
    ArtifactHeader other = header();
    other.start_monotonic_ns += 1;
    std::filesystem::remove(checkpoint_path(killed));
    ArtifactWriter writer(checkpoint_path(killed), other,
                          {.layout = ArtifactLayout::Compact, .aggregator = std::make_shared<HeapAggregator>(kStart, false)});
    writer.finish(ArtifactTrailer{});
  }
  run = analyze_recording(o);
  warnings.clear();
  for (const std::string& warning : run.report.warnings) warnings += warning + "\n";
  EXPECT_NE(warnings.find("no heap figures: no Aggregate records: the recording ended before memtrack wrote its "
                          "figures; its checkpoint " + checkpoint_path(killed) + " is of another recording"),
            std::string::npos)
      << warnings;
  EXPECT_EQ(run.report.totals.alloc_calls(), 0u);
}

// A state as the aggregator writes it, for the tests of malformed ones.
std::vector<uint8_t> aggregated_state(const std::vector<Event>& events) {
  HeapAggregator aggregator(kStart, false);
  for (const Event& e : events) aggregator.add(e);
  return aggregator.state();
}

SiteId site_by_order(uint64_t, int32_t, int32_t) {
  static SiteId next = 0;
  return ++next;
}

// A state taken while recording goes on (record --aggregate's checkpoints)
// holds the figures of a recording that ended then, and leaves the
// aggregator as it was: the final state is the one of an aggregator never
// asked before (the first state finished the replay).
TEST_F(RecordingAnalysis, AStateTakenMidwayIsTheRecordingEndedThenAndChangesNothing) {
  HeapAggregator asked(kStart, false), never_asked(kStart, false);
  std::vector<uint8_t> midway;
  for (size_t i = 0; i < events_.size(); ++i) {
    asked.add(events_[i]);
    never_asked.add(events_[i]);
    if (events_[i].type == EventType::Malloc && events_[i].timestamp == kStart + 30 * kMs) midway = asked.state();
  }
  EXPECT_EQ(asked.state(), never_asked.state());
  ASSERT_FALSE(midway.empty());
  // Then, process 100's three blocks of 100 bytes were live, none freed.
  AggregatedFigures then = restore_aggregate(midway, [](uint64_t, int32_t, int32_t) { return SiteId{1}; }, kStart,
                                             false);
  ASSERT_GE(then.replay.site_costs().size(), 2u);
  const SiteCosts& site = then.replay.site_costs()[1];
  EXPECT_EQ(site.allocations, 3u);
  EXPECT_EQ(site.allocated_bytes, 300u);
  EXPECT_EQ(site.live_at_end_bytes, 300u);
  EXPECT_EQ(site.live_at_end_allocations, 3u);
  EXPECT_EQ(site.leaked_bytes, 0u);
  EXPECT_EQ(site.peak_bytes, 300u);
}

TEST_F(RecordingAnalysis, AMalformedAggregatedStateIsRefusedByName) {
  const std::vector<uint8_t> state = aggregated_state(events_);
  ASSERT_NO_THROW(restore_aggregate(state, site_by_order, kStart, false));
  // Positions to spoil: each of the first 512 bytes (the sites, the
  // summary), then a sample of the timeline's buckets (75 KB here).
  std::vector<size_t> positions;
  for (size_t at = 0; at < state.size(); at += at < 512 ? 1 : 61) positions.push_back(at);
  // Cut: refused, never read past its end.
  for (size_t size : positions) {
    std::vector<uint8_t> cut(state.begin(), state.begin() + size);  // its own allocation: ASan sees overreads
    EXPECT_THROW(restore_aggregate(cut, site_by_order, kStart, false), std::runtime_error) << "cut at " << size;
  }
  // Any byte changed: refused or read, never a crash (the sanitizer build).
  for (size_t at : positions)
    for (uint8_t value : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0xdc}, uint8_t{0x7f}, uint8_t{0xcf}}) {
      std::vector<uint8_t> changed = state;
      changed[at] = value;
      try {
        restore_aggregate(changed, site_by_order, kStart, false);
      } catch (const std::runtime_error&) {
      }
    }
  std::vector<uint8_t> newer = state;
  ASSERT_EQ(newer[1], 1u);  // [version 1, ...]: a positive fixint
  newer[1] = 2;
  try {
    restore_aggregate(newer, site_by_order, kStart, false);
    ADD_FAILURE() << "version 2 was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("its version is 2; this memtrack reads version 1"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace memtrack
