// Memory over time as the outputs write it: the text report's chart, the
// JSON report's "timeline" member and the csv output.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analyze/timeline.h"
#include "output/csv_output.h"
#include "output/text/timeline_text.h"
#include "output/timeline_json.h"

namespace memtrack {
namespace {

constexpr uint64_t kStart = 1'000'000'000;
constexpr uint64_t kMs = 1'000'000;

// The process's anonymous RSS at `ms` into the recording.
Event rss(uint64_t ms, uint64_t bytes) {
  Event e;
  e.type = EventType::Rss;
  e.pid = e.tid = 7;
  e.timestamp = kStart + ms * kMs;
  e.member = static_cast<int32_t>(RssMember::Anon);
  e.size = bytes;
  return e;
}

TEST(TimelineOutput, TextChartFitsEightyColumnsWithoutColour) {
  TimelineBuilder builder({}, kStart);
  for (uint64_t ms = 0; ms < 3000; ms += 10) {
    builder.on_event(rss(ms, ms * 10'000), ms * 6000);
  }
  std::ostringstream out;
  write_timeline_text(builder.build(), out, false, false);
  std::istringstream lines(out.str());
  std::string line;
  size_t rows = 0;
  while (std::getline(lines, line)) {
    EXPECT_LE(line.size(), 80u) << line;
    EXPECT_EQ(line.find('\x1b'), std::string::npos);
    rows += line.find(" |") != std::string::npos;
  }
  EXPECT_EQ(rows, 8u) << out.str();
  EXPECT_NE(out.str().find("RSS/heap    1.67x"), std::string::npos) << out.str();
}

TEST(TimelineOutput, JsonAndCsvCarryEveryBucket) {
  TimelineBuilder builder({}, kStart);
  builder.on_event(rss(0, 4096), 10);
  builder.on_event(rss(2, 8192), 20);
  Timeline t = builder.build();
  nlohmann::json j = timeline_json(t);
  EXPECT_EQ(j["total"]["buckets"]["start_ns"].size(), 3u);
  EXPECT_EQ(j["total"]["buckets"]["rss_anon_max"][2], 8192);
  EXPECT_EQ(j["total"]["peaks"]["heap"]["bytes"], 20);
  EXPECT_EQ(j["processes"].size(), 1u);
  std::ostringstream csv;
  write_timeline_csv(t, csv);
  std::string text = csv.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1 + 3 + 3) << text;
  EXPECT_EQ(text.rfind("pid,start_s,end_s,heap_min", 0), 0u);
}

}  // namespace
}  // namespace memtrack
