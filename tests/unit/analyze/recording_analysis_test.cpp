// The analysis of a whole artifact (analyze/recording_analysis.h) on a
// hand-made recording: heap figures per process, the filters the sites and
// the timeline count, progress, and the inputs it refuses.
#include "analyze/recording_analysis.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

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
    ArtifactHeader header;
    header.command = {"fixture"};
    header.start_monotonic_ns = kStart;
    header.page_size = 4096;
    ArtifactWriter writer(file_, header);
    writer.append(events);
    ArtifactTrailer trailer;
    trailer.end_monotonic_ns = kStart + 1000 * kMs;
    trailer.counters = {{"events_lost", 0}};
    writer.finish(trailer);
  }
  void TearDown() override { std::filesystem::remove(file_); }

  AnalysisOptions options() const {
    AnalysisOptions o;
    o.file = file_;
    return o;
  }

  std::string file_;
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

}  // namespace
}  // namespace memtrack
