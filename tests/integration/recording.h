// Helpers for the recording integration tests: running `memtrack record`,
// reading the artifact, parsing a fixture's ground truth (markers.h) and
// comparing the two.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cinttypes>
#include <cstdlib>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "format/artifact.h"
#include "format/event.h"
#include "markers.h"
#include "support/test_support.h"

namespace memtrack::testing {

inline std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
  return buf;
}

inline std::string describe(const Event& e) {
  std::ostringstream s;
  s << event_type_name(e.type) << " pid=" << e.pid << " tid=" << e.tid;
  switch (e.type) {
    case EventType::Free: s << " addr=" << hex(e.addr); break;
    case EventType::Realloc: s << " size=" << e.size << " addr=" << hex(e.addr) << " old=" << hex(e.old_addr); break;
    case EventType::Fork: s << " parent=" << e.parent_pid; break;
    case EventType::Exit: s << " status=" << e.exit_code; break;
    case EventType::Exec:
      if (e.image) s << " path=" << e.image->path << " comm=" << e.image->comm;
      break;
    default: s << " size=" << e.size << " addr=" << hex(e.addr); break;
  }
  return s.str();
}

// The children of every thread of `pid` (memtrack's: its recorder).
inline std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> children;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    std::ifstream in(task.path().string() + "/children");
    for (pid_t child; in >> child;) children.push_back(child);
  }
  return children;
}

// The recorder: memtrack's child in a process group of its own.
inline pid_t recorder_of(pid_t memtrack) {
  for (pid_t child : children_of(memtrack))
    if (getpgid(child) == child) return child;
  return 0;
}

// ---------------------------------------------------------------- artifact

struct Recording {
  ReadResult read;
  std::vector<Event> events;
};

inline Recording read_recording(const std::string& path) {
  Recording r;
  r.read = read_artifact(path, [&](const Event& e) { r.events.push_back(e); });
  return r;
}

// Every loss counter of the trailer is zero (the trailer must be present).
inline ::testing::AssertionResult no_losses(const Recording& rec) {
  if (!rec.read.trailer) return ::testing::AssertionFailure() << "the artifact has no trailer (not finalized)";
  std::ostringstream lost;
  for (const auto& [name, value] : rec.read.trailer->counters)
    if ((name.ends_with("_lost") || name.ends_with("_dropped")) && value != 0) lost << " " << name << "=" << value;
  if (!lost.str().empty()) return ::testing::AssertionFailure() << "loss counters not zero:" << lost.str();
  return ::testing::AssertionSuccess();
}

// An artifact read without error or warning, with its trailer.
inline ::testing::AssertionResult clean_read(const Recording& rec) {
  std::ostringstream problems;
  if (rec.read.error) problems << " error: " << *rec.read.error << ";";
  for (const auto& w : rec.read.warnings) problems << " warning: " << w << ";";
  if (!rec.read.trailer) problems << " no trailer;";
  // The trailer counts every record written: events, Module and Aggregate records.
  uint64_t records = rec.read.stats.events + rec.read.stats.modules + rec.read.stats.aggregate_parts;
  if (rec.read.trailer && rec.read.trailer->events != records)
    problems << " trailer counts " << rec.read.trailer->events << " records, " << records << " read;";
  if (!problems.str().empty()) return ::testing::AssertionFailure() << "artifact:" << problems.str();
  return ::testing::AssertionSuccess();
}

struct Recorded {
  RunResult run;
  Recording rec;
};

// Options every recording of the test run adds (MEMTRACK_TEST_RECORD_OPTIONS,
// space-separated): ctest runs record_test once more with --uprobes.
inline std::vector<std::string> run_record_options() {
  std::vector<std::string> options;
  const char* text = std::getenv("MEMTRACK_TEST_RECORD_OPTIONS");
  std::istringstream words(text ? text : "");
  for (std::string word; words >> word;) options.push_back(word);
  return options;
}

// `argv` (a command line running `MEMTRACK_BIN record ...`, maybe behind a
// wrapper) with the run's options right after "record": a test that runs
// memtrack itself is rerun with them too.
inline std::vector<std::string> with_run_options(std::vector<std::string> argv) {
  auto record = std::find(argv.begin(), argv.end(), std::string("record"));
  if (record != argv.end()) {
    std::vector<std::string> options = run_record_options();
    argv.insert(record + 1, options.begin(), options.end());
  }
  return argv;
}

// `memtrack record -q -o DIR/a.zst -- COMMAND...`; the artifact is read when
// memtrack has exited (even unsuccessfully) and the file exists.
inline Recorded record_command(const TempDir& dir, const std::vector<std::string>& command,
                               std::chrono::milliseconds timeout = std::chrono::seconds(60),
                               const SpawnOptions& options = {},
                               const std::vector<std::string>& record_options = {}) {
  // The records layout: these tests compare the recorded addresses and
  // nanoseconds with the fixtures' ground truth (compact_layout_test holds
  // the compact layout to the same figures).
  std::vector<std::string> argv = {MEMTRACK_BIN, "record", "-q", "--records-layout", "-o", dir.file("a.zst")};
  for (const std::string& option : run_record_options()) argv.push_back(option);
  argv.insert(argv.end(), record_options.begin(), record_options.end());
  argv.push_back("--");
  argv.insert(argv.end(), command.begin(), command.end());
  Recorded r;
  r.run = run_process(argv, timeout, options);
  if (!r.run.timed_out && std::filesystem::exists(dir.file("a.zst"))) r.rec = read_recording(dir.file("a.zst"));
  return r;
}

// `fx_libc service N` (its path `fx_libc`) recorded by `memtrack record
// --pid`, attached after the service allocated N blocks of 48 bytes: it
// frees them, allocates N of 80 bytes and forks a child that leaks 24 bytes
// and exits; the recording ends (SIGINT to memtrack) while the service runs
// on, which is ended after. `service` and `child` are 0 when a step failed
// (the test has failed then).
struct AttachedService {
  RunResult memtrack;
  pid_t service = 0;
  pid_t child = 0;
};

inline AttachedService record_attached_service(const std::string& fx_libc, const std::string& artifact,
                                               unsigned long n) {
  using namespace std::chrono_literals;
  AttachedService result;
  Child service({fx_libc, "service", std::to_string(n)});
  if (!service.wait_for_stdout("ready ", 10s)) {
    ADD_FAILURE() << "the service did not start: " << service.finish(1s).describe();
    return result;
  }
  Child memtrack(with_run_options(
      {MEMTRACK_BIN, "record", "--pid", std::to_string(service.pid()), "-o", artifact}));
  if (!memtrack.wait_for_stderr("recording", 30s)) {
    ADD_FAILURE() << "memtrack did not attach: " << memtrack.finish(1s).describe();
    return result;
  }
  kill(service.pid(), SIGUSR1);
  bool served = service.wait_for_stdout("served ", 30s);
  kill(memtrack.pid(), SIGINT);
  result.memtrack = memtrack.finish(30s);
  bool ran_on = !service.exited_now();
  kill(service.pid(), SIGUSR2);
  RunResult end = service.finish(30s);
  if (!served || !ran_on || end.exit_code() != 0) {
    ADD_FAILURE() << "the service did not serve and run on to its end: " << end.describe();
    return result;
  }
  result.service = service.pid();
  result.child = std::stoi(end.out.substr(end.out.find("served ") + 7));
  return result;
}

// ------------------------------------------------------------ ground truth

struct GroundTruth {
  std::map<int, std::vector<Event>> by_pid;  // "gt" lines, in printed order
  std::map<std::pair<int, std::string>, std::vector<std::string>> info;
  std::vector<std::string> bad_lines;

  const std::vector<Event>& of(int pid) const {
    static const std::vector<Event> none;
    auto it = by_pid.find(pid);
    return it == by_pid.end() ? none : it->second;
  }
  std::string info1(int pid, const std::string& key) const {
    auto it = info.find({pid, key});
    return it == info.end() || it->second.empty() ? std::string() : it->second.front();
  }
  // The pids that printed ground truth.
  std::vector<int> pids() const {
    std::vector<int> v;
    for (const auto& [pid, events] : by_pid) v.push_back(pid);
    return v;
  }
};

inline GroundTruth parse_ground_truth(const std::string& out) {
  GroundTruth gt;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string tag;
    f >> tag;
    if (tag == "gt") {
      Event e;
      std::string kind, addr, old;
      f >> e.pid >> e.tid >> kind >> e.size >> addr >> old;
      if (!f || kind.empty()) {
        gt.bad_lines.push_back(line);
        continue;
      }
      e.addr = std::stoull(addr, nullptr, 16);
      e.old_addr = std::stoull(old, nullptr, 16);
      if (kind == "malloc") e.type = EventType::Malloc;
      else if (kind == "calloc") e.type = EventType::Calloc;
      else if (kind == "realloc") e.type = EventType::Realloc;
      else if (kind == "aligned") e.type = EventType::AlignedAlloc;
      else if (kind == "free") e.type = EventType::Free;
      else {
        gt.bad_lines.push_back(line);
        continue;
      }
      gt.by_pid[e.pid].push_back(e);
    } else if (tag == "info") {
      int pid = 0;
      std::string key, value;
      f >> pid >> key;
      std::getline(f >> std::ws, value);
      gt.info[{pid, key}].push_back(value);
    }
  }
  return gt;
}

// ----------------------------------------------------------------- windows

inline bool is_alloc_event(const Event& e) { return is_allocation(e.type) || e.type == EventType::Free; }

// The allocator events of `pid` strictly between its BEGIN and END markers
// (markers.h), in file order. Fails when the markers are not there exactly
// once, or when the BEGIN marker's block is not freed right after.
inline ::testing::AssertionResult marker_window(const std::vector<Event>& events, int pid, std::vector<Event>* out) {
  out->clear();
  std::vector<Event> own;
  for (const auto& e : events)
    if (e.pid == pid && is_alloc_event(e)) own.push_back(e);
  auto is_marker = [](const Event& e, size_t size) { return e.type == EventType::Malloc && e.size == size; };
  std::vector<size_t> begins, ends;
  for (size_t i = 0; i < own.size(); ++i) {
    if (is_marker(own[i], MEMTRACK_MARKER_BEGIN)) begins.push_back(i);
    if (is_marker(own[i], MEMTRACK_MARKER_END)) ends.push_back(i);
  }
  if (begins.size() != 1 || ends.size() != 1)
    return ::testing::AssertionFailure() << "pid " << pid << ": expected one BEGIN and one END marker allocation, found "
                                         << begins.size() << " and " << ends.size() << " (among " << own.size()
                                         << " allocator events of the pid, " << events.size() << " events in all)";
  size_t b = begins[0], e = ends[0];
  if (e <= b) return ::testing::AssertionFailure() << "pid " << pid << ": the END marker precedes BEGIN";
  // The marker's own free: the next event of the marker's thread.
  size_t start = b + 1;
  for (; start < e; ++start)
    if (own[start].tid == own[b].tid) break;
  if (start >= e || own[start].type != EventType::Free || own[start].addr != own[b].addr)
    return ::testing::AssertionFailure() << "pid " << pid << ": the BEGIN marker block " << hex(own[b].addr)
                                         << " is not freed by the next event of its thread";
  for (size_t i = b + 1; i < e; ++i)
    if (i != start) out->push_back(own[i]);
  return ::testing::AssertionSuccess();
}

// Compares recorded allocator events with the fixture's ground truth: kinds,
// sizes (not of frees), addresses, realloc's old address, pid and tid, in
// order.
inline ::testing::AssertionResult same_events(const std::vector<Event>& recorded, const std::vector<Event>& expected) {
  auto equal = [](const Event& a, const Event& b) {
    if (a.type != b.type || a.pid != b.pid || a.tid != b.tid || a.addr != b.addr) return false;
    if (a.type != EventType::Free && a.size != b.size) return false;
    if (a.type == EventType::Realloc && a.old_addr != b.old_addr) return false;
    return true;
  };
  size_t n = std::max(recorded.size(), expected.size());
  size_t first_diff = n;
  for (size_t i = 0; i < n && first_diff == n; ++i)
    if (i >= recorded.size() || i >= expected.size() || !equal(recorded[i], expected[i])) first_diff = i;
  if (first_diff == n && recorded.size() == expected.size()) return ::testing::AssertionSuccess();
  auto failure = ::testing::AssertionFailure();
  failure << "recorded " << recorded.size() << " events, expected " << expected.size() << "; first difference at #"
          << first_diff << "\n";
  size_t from = first_diff >= 3 ? first_diff - 3 : 0;
  for (size_t i = from; i < std::min(n, first_diff + 12); ++i) {
    failure << "  #" << i << (i == first_diff ? " >" : "  ") << " recorded: "
            << (i < recorded.size() ? describe(recorded[i]) : std::string("(none)"))
            << "\n        expected: " << (i < expected.size() ? describe(expected[i]) : std::string("(none)")) << "\n";
  }
  return failure;
}

// Address consistency of a window: every allocation returns a block that is
// not live, realloc's old block and every freed block are live (realloc's old
// block may be 0: realloc(NULL, n)); with `all_freed`, nothing is live at the
// end.
inline ::testing::AssertionResult consistent_addresses(const std::vector<Event>& window, bool all_freed) {
  std::set<std::pair<int, uint64_t>> live;  // (pid, addr)
  for (const auto& e : window) {
    if (e.type == EventType::Free) {
      if (!live.erase({e.pid, e.addr}))
        return ::testing::AssertionFailure() << "frees a block that is not live: " << describe(e);
      continue;
    }
    if (!is_allocation(e.type)) continue;
    if (e.type == EventType::Realloc && e.old_addr != 0 && !live.erase({e.pid, e.old_addr}))
      return ::testing::AssertionFailure() << "reallocates a block that is not live: " << describe(e);
    if (e.addr == 0) return ::testing::AssertionFailure() << "allocation of address 0: " << describe(e);
    if (!live.insert({e.pid, e.addr}).second)
      return ::testing::AssertionFailure() << "returns a block that is already live: " << describe(e);
  }
  if (all_freed && !live.empty())
    return ::testing::AssertionFailure() << live.size() << " block(s) never freed, e.g. " << hex(live.begin()->second);
  return ::testing::AssertionSuccess();
}

// Within each thread, timestamps never go backwards in file order.
inline ::testing::AssertionResult ordered_per_thread(const std::vector<Event>& events) {
  std::map<int, const Event*> last;
  for (const auto& e : events) {
    auto [it, first] = last.try_emplace(e.tid, &e);
    if (!first && e.timestamp < it->second->timestamp)
      return ::testing::AssertionFailure() << "timestamp goes backwards in thread " << e.tid << ": "
                                           << describe(*it->second) << " at " << it->second->timestamp << ", then "
                                           << describe(e) << " at " << e.timestamp;
    it->second = &e;
  }
  return ::testing::AssertionSuccess();
}

// (kind, size) of each event; frees as (Free, 0).
inline std::vector<std::pair<EventType, uint64_t>> shape(const std::vector<Event>& events) {
  std::vector<std::pair<EventType, uint64_t>> v;
  for (const auto& e : events) v.emplace_back(e.type, e.type == EventType::Free ? 0 : e.size);
  return v;
}

inline std::vector<Event> of_tid(const std::vector<Event>& events, int tid) {
  std::vector<Event> v;
  for (const auto& e : events)
    if (e.tid == tid) v.push_back(e);
  return v;
}

inline std::vector<Event> of_pid(const std::vector<Event>& events, int pid, bool allocator_only) {
  std::vector<Event> v;
  for (const auto& e : events)
    if (e.pid == pid && (!allocator_only || is_alloc_event(e))) v.push_back(e);
  return v;
}

}  // namespace memtrack::testing

// Prints (kind, size) pairs in gtest messages.
namespace memtrack {
inline void PrintTo(EventType t, std::ostream* os) { *os << event_type_name(t); }
}  // namespace memtrack
