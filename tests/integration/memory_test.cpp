// Memory over time on fx_memory: the mappings it makes itself are recorded
// (mmap, munmap, mremap, brk), those glibc makes inside malloc and free are
// not; the Rss records agree with /proc/self/status at the points the
// fixture sampled it, within one coalescing step; the timeline shows the
// 64 MiB mapping and the 32 MiB touched in it. Also with the /proc/PID/statm
// fallback, and with memory records turned off. Needs root or
// CAP_BPF+CAP_PERFMON; otherwise every test is reported as skipped, loudly.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyze/heap_replay.h"
#include "analyze/timeline.h"
#include "record/intake/tsc_clock.h"
#include "recording.h"

namespace memtrack::testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kStep = 256 * 1024;  // the recorder's default coalescing step

struct Point {
  uint64_t time_ns = 0, vm_rss = 0, rss_anon = 0, rss_file = 0;
};

struct FixtureOutput {
  std::map<std::string, Point> points;
  std::map<std::string, std::pair<uint64_t, uint64_t>> maps;  // name -> addr, size
};

FixtureOutput parse(const std::string& out) {
  FixtureOutput f;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string kind, name;
    words >> kind >> name;
    if (kind == "point") {
      Point p;
      words >> p.time_ns >> p.vm_rss >> p.rss_anon >> p.rss_file;
      f.points[name] = p;
    } else if (kind == "map") {
      uint64_t addr = 0, size = 0;
      words >> addr >> size;
      f.maps[name] = {addr, size};
    }
  }
  return f;
}

std::vector<Event> of_type(const std::vector<Event>& events, EventType type, int pid) {
  std::vector<Event> out;
  for (const Event& e : events)
    if (e.type == type && e.pid == pid) out.push_back(e);
  return out;
}

// The value of an Rss member as recorded at `time_ns`: the last record at or
// before it.
uint64_t rss_at(const std::vector<Event>& events, int pid, RssMember member, uint64_t time_ns) {
  uint64_t value = 0;
  for (const Event& e : events)
    if (e.type == EventType::Rss && e.pid == pid && e.member == static_cast<int32_t>(member) && e.timestamp <= time_ns)
      value = e.size;
  return value;
}

class Memory : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_bpf_privileges()) GTEST_SKIP() << kNoPrivilegesMessage;
  }

  struct Run {
    Recorded recorded;
    FixtureOutput fixture;
    int pid = 0;
  };
  Run run(const std::vector<std::string>& record_options = {}) {
    Run r;
    r.recorded = record_command(dir_, {FX_MEMORY}, std::chrono::seconds(60), {}, record_options);
    EXPECT_EQ(r.recorded.run.exit_code(), 0) << r.recorded.run.describe();
    EXPECT_TRUE(clean_read(r.recorded.rec));
    EXPECT_TRUE(no_losses(r.recorded.rec));
    r.fixture = parse(r.recorded.run.out);
    for (const Event& e : r.recorded.rec.events)
      if (e.type == EventType::Exit) r.pid = e.pid;
    return r;
  }

  TempDir dir_;
};

// The interposer stamps its events with the TSC where the kernel's clock is
// built on it, and the recorder turns the ticks into CLOCK_MONOTONIC: the
// malloc and free of the 8 MiB block fall between the fixture's own
// clock_gettime points around them (30 ms apart), as they do when the
// interposer reads CLOCK_MONOTONIC itself (MEMTRACK_CLOCK=monotonic).
TEST_F(Memory, AllocatorEventsCarryTheMonotonicClockOnEitherClock) {
  std::string why;
  const bool tsc = TscClock::usable(&why);
  if (!tsc) std::cerr << "The TSC is not used on this machine (" << why << "): one clock tested, twice\n";
  for (bool monotonic : {false, true}) {
    SpawnOptions env;
    if (monotonic) env.env.push_back({"MEMTRACK_CLOCK", "monotonic"});
    Recorded recorded = record_command(dir_, {FX_MEMORY}, std::chrono::seconds(60), env);
    ASSERT_EQ(recorded.run.exit_code(), 0) << recorded.run.describe();
    ASSERT_TRUE(no_losses(recorded.rec));
    const auto& counters = recorded.rec.read.trailer->counters;
    EXPECT_EQ(counters.at("interposed_processes"), 1u);
    EXPECT_EQ(counters.at("interposer_clock_tsc"), tsc && !monotonic ? 1u : 0u);
    if (tsc && !monotonic) {
      EXPECT_LT(counters.at("interposer_clock_max_error_ns"), 20000u);
    }
    FixtureOutput fixture = parse(recorded.run.out);
    ASSERT_EQ(fixture.points.size(), 10u) << recorded.run.describe();
    const Event *malloced = nullptr, *freed = nullptr;
    for (const Event& e : recorded.rec.events)
      if (e.type == EventType::Malloc && e.size == 8 * kMiB) malloced = &e;
    ASSERT_NE(malloced, nullptr) << "the Malloc of 8 MiB";
    for (const Event& e : recorded.rec.events)
      if (e.type == EventType::Free && e.addr == malloced->addr && e.timestamp >= malloced->timestamp) freed = &e;
    ASSERT_NE(freed, nullptr) << "its Free";
    EXPECT_GT(malloced->timestamp, fixture.points.at("unmapped").time_ns) << "monotonic " << monotonic;
    EXPECT_LT(malloced->timestamp, fixture.points.at("malloced").time_ns) << "monotonic " << monotonic;
    EXPECT_GT(freed->timestamp, fixture.points.at("malloced").time_ns) << "monotonic " << monotonic;
    EXPECT_LT(freed->timestamp, fixture.points.at("freed").time_ns) << "monotonic " << monotonic;
  }
}

TEST_F(Memory, OwnMappingsAreRecordedAndTheAllocatorsAreNot) {
  Run r = run();
  ASSERT_EQ(r.fixture.points.size(), 10u) << r.recorded.run.describe();
  const std::vector<Event>& events = r.recorded.rec.events;
  auto [own, own_size] = r.fixture.maps.at("own");
  auto has = [&](EventType type, uint64_t addr, uint64_t size) {
    for (const Event& e : of_type(events, type, r.pid))
      if (e.addr == addr && e.size == size) return true;
    return false;
  };
  EXPECT_TRUE(has(EventType::Mmap, own, own_size)) << "the 64 MiB mmap";
  EXPECT_TRUE(has(EventType::Munmap, own, own_size)) << "its munmap";

  // malloc(8 MiB) is served by mmap inside malloc and unmapped inside free:
  // the Malloc record counts it, no mapping record between the two points may.
  uint64_t block = 0;
  for (const Event& e : of_type(events, EventType::Malloc, r.pid))
    if (e.size == 8 * kMiB) block = e.addr;
  ASSERT_NE(block, 0u) << "the Malloc of 8 MiB";
  uint64_t from = r.fixture.points.at("unmapped").time_ns, to = r.fixture.points.at("freed").time_ns;
  for (EventType type : {EventType::Mmap, EventType::Munmap})
    for (const Event& e : of_type(events, type, r.pid))
      EXPECT_FALSE(e.timestamp > from && e.timestamp < to && e.addr <= block && block < e.addr + e.size)
          << event_type_name(type) << " of the allocator's block at " << hex(e.addr) << " size " << e.size;
  EXPECT_GE(r.recorded.rec.read.trailer->counters.at("map_calls_in_allocator"), 2u);

  // sbrk outside malloc: up 1 MiB and back.
  auto [old_break, brk_size] = r.fixture.maps.at("brk");
  bool up = false, down = false;
  for (const Event& e : of_type(events, EventType::Brk, r.pid)) {
    up |= e.old_addr == old_break && e.addr == old_break + brk_size;
    down |= e.old_addr == old_break + brk_size && e.addr == old_break;
  }
  EXPECT_TRUE(up && down) << "Brk records of the sbrk up and down";

  // mremap: 1 MiB grown to 4 MiB (moved or not).
  auto [grown, grown_size] = r.fixture.maps.at("remapped");
  bool remapped = false;
  for (const Event& e : of_type(events, EventType::Mremap, r.pid))
    remapped |= e.addr == grown && e.size == grown_size && e.old_size == kMiB;
  EXPECT_TRUE(remapped) << "the Mremap record";
}

// The mapping records of the fixture between its first and last point, in
// order: "TYPE KiB" (Brk: the break's move, Mremap: old -> new).
std::vector<std::string> mapping_calls_between_points(const std::vector<Event>& events, int pid,
                                                      const FixtureOutput& fixture) {
  uint64_t from = fixture.points.at("start").time_ns, to = fixture.points.at("end").time_ns;
  std::vector<std::string> calls;
  for (const Event& e : events) {
    if (e.pid != pid || e.timestamp < from || e.timestamp > to) continue;
    std::string kib;
    if (e.type == EventType::Brk)
      kib = std::to_string((static_cast<int64_t>(e.addr) - static_cast<int64_t>(e.old_addr)) / 1024);
    else if (e.type == EventType::Mremap)
      kib = std::to_string(e.old_size / 1024) + " -> " + std::to_string(e.size / 1024);
    else if (e.type == EventType::Mmap || e.type == EventType::Munmap)
      kib = std::to_string(e.size / 1024);
    else
      continue;
    calls.push_back(std::string(event_type_name(e.type)) + " " + kib + " KiB");
  }
  return calls;
}

// Both paths record exactly the program's own mappings: the fast path too,
// where glibc's allocator probes are detached (glibc's mmap inside malloc and
// munmap inside free, and the heap's brk, were counted as the program's).
TEST_F(Memory, BothPathsRecordExactlyTheProgramsOwnMappings) {
  const std::vector<std::string> expected = {"Mmap 65536 KiB", "Munmap 65536 KiB", "Brk 1024 KiB", "Brk -1024 KiB",
                                             "Mmap 1024 KiB", "Mremap 1024 -> 4096 KiB", "Munmap 4096 KiB"};
  for (bool fast_path : {false, true}) {
    SCOPED_TRACE(fast_path ? "fast path" : "--uprobes");
    Run r = run(fast_path ? std::vector<std::string>{} : std::vector<std::string>{"--uprobes"});
    ASSERT_EQ(r.fixture.points.size(), 10u) << r.recorded.run.describe();
    const auto& counters = r.recorded.rec.read.trailer->counters;
    EXPECT_EQ(counters.contains("interposed_processes") ? counters.at("interposed_processes") : 0, fast_path ? 1u : 0u)
        << "the path taken";
    EXPECT_EQ(mapping_calls_between_points(r.recorded.rec.events, r.pid, r.fixture), expected);
    EXPECT_GE(counters.at("map_calls_in_allocator"), 2u) << "malloc's mmap and free's munmap";
  }
}

TEST_F(Memory, RssAgreesWithProcStatusWithinOneStep) {
  Run r = run();
  ASSERT_EQ(r.fixture.points.size(), 10u) << r.recorded.run.describe();
  const std::vector<Event>& events = r.recorded.rec.events;
  for (const auto& [name, point] : r.fixture.points) {
    uint64_t anon = rss_at(events, r.pid, RssMember::Anon, point.time_ns);
    uint64_t file = rss_at(events, r.pid, RssMember::File, point.time_ns);
    EXPECT_LE(std::llabs(static_cast<long long>(anon - point.rss_anon)), static_cast<long long>(kStep))
        << name << ": recorded anon " << anon << ", /proc says " << point.rss_anon;
    EXPECT_LE(std::llabs(static_cast<long long>(file - point.rss_file)), static_cast<long long>(kStep))
        << name << ": recorded file " << file << ", /proc says " << point.rss_file;
  }
  const auto& c = r.recorded.rec.read.trailer->counters;
  EXPECT_GT(c.at("rss_changes"), c.at("rss_records")) << "coalescing kept fewer records than changes";
}

TEST_F(Memory, TimelineShowsTheMappedAndTouchedHalf) {
  Run r = run();
  ASSERT_EQ(r.fixture.points.size(), 10u) << r.recorded.run.describe();
  const ReadResult& read = r.recorded.rec.read;
  HeapReplay heap;
  TimelineBuilder builder({.max_points = 100000, .max_process_points = 100000, .to_ns = std::nullopt},
                          read.header.start_monotonic_ns);
  for (const Event& e : r.recorded.rec.events) {
    heap.on_event(e);
    builder.on_event(e, heap.live_bytes_of(e.pid));
  }
  Timeline timeline = builder.build();
  ASSERT_EQ(timeline.processes.size(), 1u);
  const ProcessTimeline& p = timeline.processes[0];
  ASSERT_TRUE(p.has_rss && p.has_mapped);
  // The series' last values at a point: the bucket holding its time.
  auto at = [&](const std::string& point, Series s) {
    uint64_t t = ns_since(r.fixture.points.at(point).time_ns, read.header.start_monotonic_ns);
    return p.buckets.at(t / p.bucket_ns).last[static_cast<size_t>(s)];
  };
  EXPECT_EQ(at("mapped", Series::Mapped) - at("start", Series::Mapped), 64 * kMiB);
  EXPECT_EQ(at("touched", Series::Mapped), at("mapped", Series::Mapped));
  EXPECT_EQ(at("unmapped", Series::Mapped), at("start", Series::Mapped));
  EXPECT_EQ(at("malloced", Series::Mapped), at("start", Series::Mapped)) << "malloc's mmap is not the program's";
  int64_t touched = static_cast<int64_t>(at("touched", Series::RssAnon)) - static_cast<int64_t>(at("mapped", Series::RssAnon));
  EXPECT_LE(std::llabs(touched - static_cast<int64_t>(32 * kMiB)), static_cast<long long>(2 * kStep)) << touched;
  EXPECT_GE(p.peaks[static_cast<size_t>(Series::Mapped)].bytes, 64 * kMiB);
  EXPECT_GE(p.peaks[static_cast<size_t>(Series::RssAnon)].bytes, 32 * kMiB);
  EXPECT_GE(p.peaks[static_cast<size_t>(Series::Heap)].bytes, 8 * kMiB);

  // The CSV output, read by Python's csv module (what plotting scripts use):
  // one header, rows of equal width, numbers, and the 64 MiB mapping.
  std::string csv = dir_.file("timeline.csv");
  RunResult report = run_process({MEMTRACK_BIN, "report", "--format", "csv", "-o", csv, dir_.file("a.zst")},
                                 std::chrono::seconds(60));
  ASSERT_EQ(report.exit_code(), 0) << report.describe();
  const char* check = R"(
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
assert rows, "no rows"
assert all(None not in r and None not in r.values() for r in rows), "rows of unequal width"
pids = {r["pid"] for r in rows}
assert "total" in pids and len(pids) == 2, pids
for r in rows:
    for k, v in r.items():
        if k != "pid": float(v)
print(max(int(r["mapped_max"]) - int(rows[0]["mapped_min"]) for r in rows if r["pid"] == "total"))
)";
  RunResult python = run_process({"/usr/bin/python3", "-c", check, csv}, std::chrono::seconds(60));
  ASSERT_EQ(python.exit_code(), 0) << python.describe();
  EXPECT_GE(std::stoull(python.out), 64 * kMiB) << python.out;
}

TEST_F(Memory, StatmFallbackRecordsRss) {
  Run r = run({"--rss-sampling"});
  ASSERT_EQ(r.fixture.points.size(), 10u) << r.recorded.run.describe();
  const std::vector<std::string>& features = r.recorded.rec.read.header.features;
  EXPECT_NE(std::find(features.begin(), features.end(), "rss-statm"), features.end());
  // The fixture holds each point's state 30 ms before and after it: a sample
  // taken within 25 ms of the point saw that state. Samples every 10 ms find
  // most points; a loaded machine may delay the sampler past some windows,
  // which is no error of the figures: those points are not judged, but the
  // sampler must have judged at least three. (It used to require a sample
  // after "touched", which load could push past the munmap.)
  constexpr uint64_t kWindowNs = 25'000'000;
  size_t judged = 0;
  for (const auto& [name, point] : r.fixture.points) {
    std::optional<uint64_t> sampled;
    for (const Event& e : of_type(r.recorded.rec.events, EventType::Rss, r.pid))
      if (e.member == static_cast<int32_t>(RssMember::Anon) && e.timestamp + kWindowNs >= point.time_ns &&
          e.timestamp <= point.time_ns + kWindowNs)
        sampled = e.size;
    if (!sampled) continue;
    ++judged;
    EXPECT_LE(std::llabs(static_cast<long long>(*sampled - point.rss_anon)), static_cast<long long>(kStep))
        << name << ": sampled anon " << *sampled << ", /proc says " << point.rss_anon;
  }
  EXPECT_GE(judged, 3u) << "points with a sample within 25 ms of them";
}

// Without memory records (as in artifacts older than them) the report still
// has the heap's timeline and says RSS and mappings were not recorded.
TEST_F(Memory, NoMemoryRecordsWhenTurnedOff) {
  Run r = run({"--no-memory-records"});
  for (const Event& e : r.recorded.rec.events) EXPECT_FALSE(is_memory_record(e.type)) << describe(e);
  EXPECT_FALSE(r.recorded.rec.read.trailer->counters.contains("rss_changes"));
  RunResult report = run_process({MEMTRACK_BIN, "report", "--format", "json", dir_.file("a.zst")}, std::chrono::seconds(60));
  ASSERT_EQ(report.exit_code(), 0) << report.describe();
  nlohmann::json total = nlohmann::json::parse(report.out).at("timeline").at("total");
  EXPECT_FALSE(total.at("has_rss").get<bool>());
  EXPECT_FALSE(total.at("has_mapped").get<bool>());
  EXPECT_GE(total.at("peaks").at("heap").at("bytes").get<uint64_t>(), 8 * kMiB) << "the heap's series is there";
  EXPECT_TRUE(total.at("rss_to_heap").is_null());
}

}  // namespace
}  // namespace memtrack::testing
