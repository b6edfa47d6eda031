// The mapping collector against a real process tree: fx_mappings (started
// stopped before its exec, as the recorder starts its target) dlopens a
// library twice at two addresses and forks a child that dlopens another; the
// perf records must match the /proc/self/maps view the fixture prints, and a
// /proc snapshot of the stopped fixture must match what perf reported.
// perf events on one's own child need no privilege at perf_event_paranoid
// <= 2; a loud skip says so where the kernel refuses them anyway.
#include <fcntl.h>
#include <gelf.h>
#include <linux/perf_event.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "analyze/module_map.h"
#include "record/intake/mapping_collector.h"
#include "support/test_support.h"

namespace memtrack::testing {
namespace {

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + ts.tv_nsec;
}

std::string resolved(const std::string& path) { return std::filesystem::canonical(path).string(); }

// A program started stopped before its exec (as TargetProcess does), in its
// own process group, which is killed and reaped on scope exit; its stdout is
// captured.
class StoppedChild {
 public:
  enum class State { Stopped, Exited, TimedOut };

  explicit StoppedChild(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      setpgid(0, 0);
      dup2(out[1], STDOUT_FILENO);
      raise(SIGSTOP);
      execv(args[0], args.data());
      _exit(127);
    }
    setpgid(pid_, pid_);
    close(out[1]);
    out_fd_ = out[0];
    fcntl(out_fd_, F_SETFL, O_NONBLOCK);
    int status = 0;
    if (waitpid(pid_, &status, WUNTRACED) != pid_ || !WIFSTOPPED(status))
      throw std::runtime_error("the child did not stop before its exec");
  }
  ~StoppedChild() {
    if (!exited_) {
      kill(-pid_, SIGKILL);
      kill(-pid_, SIGCONT);
      waitpid(pid_, nullptr, 0);
    }
    close(out_fd_);
  }
  StoppedChild(const StoppedChild&) = delete;
  StoppedChild& operator=(const StoppedChild&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& out() const { return out_; }
  void resume() const { kill(pid_, SIGCONT); }

  // Runs `tick` every 10 ms until the child stops or exits, or `timeout`.
  State run(std::chrono::milliseconds timeout, const std::function<void()>& tick) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      tick();
      read_output();
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG | WUNTRACED) == pid_) {
        read_output();
        if (WIFSTOPPED(status)) return State::Stopped;
        exited_ = true;
        status_ = status;
        return State::Exited;
      }
      if (std::chrono::steady_clock::now() >= deadline) return State::TimedOut;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  int wait_status() const { return status_; }

 private:
  void read_output() {
    char chunk[4096];
    ssize_t got;
    while ((got = read(out_fd_, chunk, sizeof chunk)) > 0) out_.append(chunk, static_cast<size_t>(got));
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string out_;
  bool exited_ = false;
  int status_ = 0;
};

// One "map" line of the fixture's ground truth.
struct Seen {
  int32_t pid = 0;
  std::string label;
  uint64_t start = 0, end = 0, offset = 0;
  std::string path;
};

std::vector<Seen> parse_ground_truth(const std::string& out) {
  std::vector<Seen> seen;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("map ")) continue;
    Seen s;
    std::istringstream fields(line.substr(4));
    fields >> s.pid >> s.label >> std::hex >> s.start >> s.end >> s.offset >> std::ws;
    std::getline(fields, s.path);
    seen.push_back(s);
  }
  return seen;
}

// The GNU build id note of an ELF file, empty if it has none.
std::vector<uint8_t> gnu_build_id(const std::string& path) {
  elf_version(EV_CURRENT);
  std::vector<uint8_t> id;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return id;
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  for (Elf_Scn* section = nullptr; elf && id.empty() && (section = elf_nextscn(elf, section));) {
    GElf_Shdr header;
    if (!gelf_getshdr(section, &header) || header.sh_type != SHT_NOTE) continue;
    Elf_Data* data = elf_getdata(section, nullptr);
    GElf_Nhdr note;
    size_t name_at, desc_at;
    for (size_t at = 0; data && (at = gelf_getnote(data, at, &note, &name_at, &desc_at)) > 0;) {
      const auto* bytes = static_cast<const uint8_t*>(data->d_buf);
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(bytes + name_at, "GNU", 4) == 0) {
        id.assign(bytes + desc_at, bytes + desc_at + note.n_descsz);
        break;
      }
    }
  }
  if (elf) elf_end(elf);
  close(fd);
  return id;
}

// Everything one run of fx_mappings under a perf MappingCollector gave.
struct FixtureRun {
  bool perf = false;
  std::string fallback_reason;
  std::vector<Event> events;    // perf Mapping events, in drain order
  std::vector<Event> snapshot;  // /proc snapshot while the fixture was stopped
  std::map<std::string, uint64_t> counters;
  std::vector<Seen> ground_truth;
  int32_t pid = 0;
  uint64_t resumed_ns = 0, stopped_ns = 0, exited_ns = 0;

  const Seen* seen(const std::string& label) const {
    for (const Seen& s : ground_truth)
      if (s.label == label) return &s;
    return nullptr;
  }
  // The perf events of `pid` describing exactly this mapping.
  std::vector<const Event*> reported(int32_t of_pid, const Seen& s) const {
    std::vector<const Event*> found;
    for (const Event& e : events)
      if (e.pid == of_pid && e.addr == s.start && e.mapping->len == s.end - s.start &&
          e.mapping->file_offset == s.offset && e.mapping->path == s.path)
        found.push_back(&e);
    return found;
  }
};

FixtureRun run_fixture() {
  FixtureRun run;
  StoppedChild fixture({FX_MAPPINGS, FX_MAPLIB_A, FX_MAPLIB_B});
  run.pid = fixture.pid();
  MappingCollector collector(fixture.pid());
  run.perf = collector.source() == MappingCollector::Source::Perf;
  run.fallback_reason = collector.fallback_reason();
  if (!run.perf) return run;
  // As the recorder's poller does: the watermark first, then the drain.
  auto drain = [&](uint64_t watermark) {
    std::vector<Event> batch = collector.drain(watermark);
    run.events.insert(run.events.end(), batch.begin(), batch.end());
  };
  auto drain_now = [&] { drain(monotonic_ns()); };

  run.resumed_ns = monotonic_ns();
  fixture.resume();
  StoppedChild::State state = fixture.run(std::chrono::seconds(20), drain_now);
  EXPECT_EQ(state, StoppedChild::State::Stopped) << "fixture output:\n" << fixture.out();
  if (state != StoppedChild::State::Stopped) return run;
  run.stopped_ns = monotonic_ns();
  drain_now();
  MappingCollector procfs;
  run.snapshot = procfs.snapshot_mappings(fixture.pid(), run.stopped_ns);

  fixture.resume();
  state = fixture.run(std::chrono::seconds(20), drain_now);
  EXPECT_EQ(state, StoppedChild::State::Exited) << "fixture output:\n" << fixture.out();
  EXPECT_TRUE(WIFEXITED(fixture.wait_status()) && WEXITSTATUS(fixture.wait_status()) == 0)
      << "wait status " << fixture.wait_status() << ", output:\n" << fixture.out();
  run.exited_ns = monotonic_ns();
  drain(UINT64_MAX);
  run.counters = collector.counters();
  run.ground_truth = parse_ground_truth(fixture.out());
  return run;
}

// Skips the current test loudly when the collector could not use perf.
#define SKIP_IF_PERF_REFUSED(run)                                                                      \
  do {                                                                                               \
    if (!(run).perf) {                                                                               \
      std::string why = "\n*** SKIPPED: the kernel refused perf events on our own child (" +          \
                        (run).fallback_reason + "); the perf mapping tests did NOT run. ***\n";       \
      std::fputs(why.c_str(), stderr);                                                               \
      GTEST_SKIP() << why;                                                                           \
    }                                                                                                \
  } while (0)

class Mappings : public ::testing::Test {
 protected:
  void SetUp() override {
    run_ = run_fixture();
    SKIP_IF_PERF_REFUSED(run_);
    ASSERT_FALSE(HasFailure());
    for (const char* label : {"a-first", "a-second", "b-child", "final"})
      ASSERT_TRUE(run_.seen(label)) << "no '" << label << "' line in the fixture's output";
  }
  FixtureRun run_;
};

TEST_F(Mappings, NothingIsLostOrDroppedAndEveryRecordIsCounted) {
  EXPECT_EQ(run_.counters["mapping_records_lost"], 0u);
  EXPECT_EQ(run_.counters["mapping_records_dropped"], 0u);
  EXPECT_EQ(run_.counters["mapping_records"], run_.events.size());
  std::cerr << "measured: " << run_.events.size() << " Mapping records for the fixture's tree\n";
}

TEST_F(Mappings, TimestampsAreMonotonicClockTimesOfTheRun) {
  for (const Event& e : run_.events) {
    EXPECT_GE(e.timestamp, run_.resumed_ns) << e.mapping->path;
    EXPECT_LE(e.timestamp, run_.exited_ns) << e.mapping->path;
    EXPECT_EQ(e.type, EventType::Mapping);
  }
}

// The exec's own mappings (executable and interpreter, made by the kernel
// before the Exec tracepoint) and libc: every code mapping the fixture still
// has at the end was reported under its pid, exactly as /proc shows it.
TEST_F(Mappings, EveryFinalCodeMappingWasReported) {
  std::set<std::string> final_paths;
  for (const Seen& s : run_.ground_truth) {
    if (s.label != "final") continue;
    final_paths.insert(s.path);
    EXPECT_EQ(run_.reported(run_.pid, s).size(), 1u) << s.path << " at 0x" << std::hex << s.start;
  }
  EXPECT_TRUE(final_paths.count(resolved(FX_MAPPINGS)));
  EXPECT_TRUE(final_paths.count(resolved("/lib64/ld-linux-x86-64.so.2")));
  EXPECT_TRUE(std::any_of(final_paths.begin(), final_paths.end(),
                          [](const std::string& p) { return p.ends_with("/libc.so.6"); }));
}

// The first mapping after the exec is the executable, flagged new_image;
// ModuleMap relies on it to keep the exec's mappings past the Exec record.
TEST_F(Mappings, TheExecutableComesFirstFlaggedAsANewImage) {
  const Event* first = nullptr;
  for (const Event& e : run_.events)
    if (e.pid == run_.pid && (!first || e.timestamp < first->timestamp)) first = &e;
  ASSERT_TRUE(first);
  EXPECT_EQ(first->mapping->path, resolved(FX_MAPPINGS));
  EXPECT_TRUE(first->mapping->new_image);
  size_t flagged = 0;
  for (const Event& e : run_.events) flagged += e.mapping->new_image;
  EXPECT_EQ(flagged, 1u) << "one exec in the tree";
}

TEST_F(Mappings, BothPlacementsOfTheReopenedLibraryAreReported) {
  const Seen& first = *run_.seen("a-first");
  const Seen& second = *run_.seen("a-second");
  ASSERT_NE(first.start, second.start);
  std::vector<const Event*> first_reports = run_.reported(run_.pid, first);
  std::vector<const Event*> second_reports = run_.reported(run_.pid, second);
  ASSERT_EQ(first_reports.size(), 1u);
  ASSERT_EQ(second_reports.size(), 1u);
  EXPECT_LT(first_reports[0]->timestamp, second_reports[0]->timestamp);

  ModuleMap map;
  for (const Event& e : run_.events) map.on_event(e);
  uint64_t between = second_reports[0]->timestamp - 1;
  const Placement* at_first = map.placement_at(run_.pid, first.start + 0x10, between);
  ASSERT_TRUE(at_first);
  EXPECT_EQ(at_first->mapping->path, first.path);
  EXPECT_EQ(map.placement_at(run_.pid, second.start + 0x10, between), nullptr);
  const Placement* at_second = map.placement_at(run_.pid, second.start + 0x10, run_.stopped_ns);
  ASSERT_TRUE(at_second);
  EXPECT_EQ(at_second->from_ns, second_reports[0]->timestamp);
}

TEST_F(Mappings, TheForkedChildsDlopenIsReportedUnderTheChildsPid) {
  const Seen& b = *run_.seen("b-child");
  ASSERT_NE(b.pid, run_.pid);
  EXPECT_EQ(run_.reported(b.pid, b).size(), 1u);
  for (const Event& e : run_.events) {
    if (e.mapping->path == b.path) {
      EXPECT_EQ(e.pid, b.pid);
    }
    if (e.pid == b.pid) {
      EXPECT_EQ(e.mapping->path, b.path) << "an inherited mapping reported again";
    }
  }
}

// With build_id set, the kernel sends the file's GNU build id (then dev and
// ino are 0) whenever it can read it.
TEST_F(Mappings, FileIdentitiesAreTheFilesBuildIds) {
  size_t with_build_id = 0;
  for (const Event& e : run_.events) {
    const MappingInfo& m = *e.mapping;
    if (m.build_id.empty()) {
      EXPECT_NE(m.ino, 0u) << m.path << ": neither build id nor inode";
      continue;
    }
    ++with_build_id;
    EXPECT_EQ(m.dev, 0u);
    EXPECT_EQ(m.ino, 0u);
    EXPECT_EQ(m.build_id, gnu_build_id(m.path)) << m.path;
    EXPECT_EQ(m.prot, unsigned(PROT_READ | PROT_EXEC)) << m.path;
  }
  std::cerr << "measured: " << with_build_id << " of " << run_.events.size() << " records carry a build id\n";
}

// What perf says was live when the fixture stopped is what /proc lists, but
// for the dlclose'd first placement: MMAP2 has no unmap record.
TEST_F(Mappings, AProcSnapshotOfTheStoppedProcessMatchesPerf) {
  ModuleMap map;
  for (const Event& e : run_.events) map.on_event(e);
  using Range = std::tuple<uint64_t, uint64_t, uint64_t, std::string>;  // start, end, offset, path
  std::set<Range> perf_live, snapshot;
  for (const Placement& p : map.placements(run_.pid))
    if (p.live_at(run_.stopped_ns)) perf_live.emplace(p.start, p.end, p.mapping->file_offset, p.mapping->path);
  for (const Event& e : run_.snapshot) {
    EXPECT_EQ(e.pid, run_.pid);
    EXPECT_EQ(e.timestamp, run_.stopped_ns);
    EXPECT_EQ(e.mapping->prot, unsigned(PROT_EXEC));
    EXPECT_NE(e.mapping->ino, 0u) << e.mapping->path;
    EXPECT_FALSE(e.mapping->new_image);
    snapshot.emplace(e.addr, e.addr + e.mapping->len, e.mapping->file_offset, e.mapping->path);
  }
  const Seen& first = *run_.seen("a-first");
  std::set<Range> expected = snapshot;
  expected.emplace(first.start, first.end, first.offset, first.path);
  EXPECT_EQ(perf_live, expected);
  EXPECT_EQ(snapshot.size(), size_t(std::count_if(run_.ground_truth.begin(), run_.ground_truth.end(),
                                                  [](const Seen& s) { return s.label == "final"; })));
}

// fx_mmap_storm under a perf collector, drained every 10 ms or only at the end.
struct StormRun {
  bool perf = false;
  std::string fallback_reason;
  std::vector<Event> events;
  std::map<std::string, uint64_t> counters;
};

StormRun run_storm(long count, long batch, long pause_ms, bool drain_while_running) {
  StormRun run;
  StoppedChild storm({FX_MMAP_STORM, std::to_string(count), std::to_string(batch), std::to_string(pause_ms)});
  MappingCollector collector(storm.pid());
  run.perf = collector.source() == MappingCollector::Source::Perf;
  run.fallback_reason = collector.fallback_reason();
  if (!run.perf) return run;
  auto drain = [&](uint64_t watermark) {
    std::vector<Event> batch_events = collector.drain(watermark);
    run.events.insert(run.events.end(), batch_events.begin(), batch_events.end());
  };
  storm.resume();
  StoppedChild::State state = storm.run(std::chrono::seconds(30), [&] {
    if (drain_while_running) drain(monotonic_ns());
  });
  EXPECT_EQ(state, StoppedChild::State::Exited);
  EXPECT_TRUE(WIFEXITED(storm.wait_status()) && WEXITSTATUS(storm.wait_status()) == 0)
      << "wait status " << storm.wait_status();
  drain(UINT64_MAX);
  run.counters = collector.counters();
  return run;
}

// The storm's own mappings: the first page of its executable.
size_t storm_mappings(const std::vector<Event>& events) {
  const std::string exe = resolved(FX_MMAP_STORM);
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return std::count_if(events.begin(), events.end(), [&](const Event& e) {
    return e.mapping->path == exe && e.mapping->file_offset == 0 && e.mapping->len == page;
  });
}

// 4000 records of 144 bytes: more than twice the largest ring (256 KiB),
// paced at 50 per 10 ms so that even the smallest ring (8 pages, ~220
// records) survives a drain 40 ms late.
TEST(MappingCollection, WrappedRingsDeliverEveryRecordInTimeOrder) {
  StormRun run = run_storm(4000, 50, 10, true);
  SKIP_IF_PERF_REFUSED(run);
  EXPECT_EQ(run.counters["mapping_records_lost"], 0u);
  EXPECT_EQ(run.counters["mapping_records_dropped"], 0u);
  EXPECT_EQ(storm_mappings(run.events), 4000u);
  // Across drains too: what a drain returns never precedes what an earlier
  // one returned.
  EXPECT_TRUE(std::is_sorted(run.events.begin(), run.events.end(),
                             [](const Event& a, const Event& b) { return a.timestamp < b.timestamp; }));
}

// Nobody drains while 20000 records are written: the kernel drops what does
// not fit and counts it, though no record after the loss fits to say so.
TEST(MappingCollection, AnOverflowedRingCountsEveryLostMapping) {
  StormRun run = run_storm(20000, 20000, 0, false);
  SKIP_IF_PERF_REFUSED(run);
  uint64_t lost = run.counters["mapping_records_lost"];
  EXPECT_GT(lost, 0u);
  EXPECT_EQ(run.counters["mapping_records_dropped"], 0u);
  // The kernel sends PERF_RECORD_EXIT to mmap events too: the storm's own
  // exit record is lost as well when the full ring has no room left for it,
  // which depends on the length of the records before it (the fixture's
  // path): every mapping is either delivered or counted, and at most the
  // exit record besides.
  uint64_t accounted = storm_mappings(run.events) + lost;
  EXPECT_TRUE(accounted == 20000u || accounted == 20000u + 1) << accounted;
  std::cerr << "measured: " << storm_mappings(run.events) << " delivered, " << lost << " lost\n";
}

TEST(MappingCollection, SnapshotsListTheExecutableFileMappingsOfALiveProcess) {
  MappingCollector procfs;
  EXPECT_EQ(procfs.source(), MappingCollector::Source::ProcMaps);
  EXPECT_EQ(procfs.feature(), "mappings-procfs");
  EXPECT_TRUE(procfs.fallback_reason().empty());
  EXPECT_TRUE(procfs.drain(UINT64_MAX).empty());

  std::vector<Event> self = procfs.snapshot_mappings(getpid(), 42);
  std::string exe = resolved("/proc/self/exe");
  EXPECT_TRUE(std::any_of(self.begin(), self.end(), [&](const Event& e) { return e.mapping->path == exe; }));
  for (const Event& e : self) {
    EXPECT_TRUE(e.mapping->path.starts_with('/')) << e.mapping->path;  // no [vdso]
    EXPECT_EQ(e.timestamp, 42u);
  }
  EXPECT_EQ(procfs.counters()["mapping_records"], self.size());
}

TEST(MappingCollection, ASnapshotOfAProcessThatIsGoneIsEmpty) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  MappingCollector procfs;
  EXPECT_TRUE(procfs.snapshot_mappings(child, 1).empty());
}

// A user may not watch another user's process: the collector falls back to
// /proc snapshots and says why. Checked in a child that drops to nobody.
TEST(MappingCollection, FallsBackToProcSnapshotsWhenPerfIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "\n*** SKIPPED: needs root to drop to another user ***\n";
  int report[2];
  ASSERT_EQ(pipe2(report, O_CLOEXEC), 0);
  constexpr int kCannotDrop = 2;
  pid_t watched = getpid();
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(report[0]);
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(kCannotDrop);
    MappingCollector collector(watched);
    std::string result = std::string(collector.feature()) + "\n" + collector.fallback_reason();
    (void)!write(report[1], result.data(), result.size());
    _exit(0);
  }
  close(report[1]);
  std::string result;
  char chunk[512];
  for (ssize_t got; (got = read(report[0], chunk, sizeof chunk)) > 0;) result.append(chunk, static_cast<size_t>(got));
  close(report[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  if (WIFEXITED(status) && WEXITSTATUS(status) == kCannotDrop)
    GTEST_SKIP() << "\n*** SKIPPED: cannot switch to uid 65534 here; the fallback was NOT tested ***\n";
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "wait status " << status;
  EXPECT_TRUE(result.starts_with("mappings-procfs\nperf_event_open on CPU ")) << result;
  EXPECT_NE(result.find("ermission denied"), std::string::npos) << result;
}

// A record laid out as the kernel writes it for the collector's attributes:
// header, body, padding to 8 bytes, sample_id {pid, tid, time}.
class RecordBuilder {
 public:
  template <typename T>
  RecordBuilder& put(const T& value) {
    append(body_, &value, sizeof value);
    return *this;
  }
  RecordBuilder& put_string(const std::string& text, bool terminate = true) {
    body_.insert(body_.end(), text.begin(), text.end());
    if (terminate) body_.push_back(0);
    while (body_.size() % 8 != 0) body_.push_back(terminate ? 0 : 'x');
    return *this;
  }
  std::vector<uint8_t> finish(uint32_t type, uint16_t misc, uint64_t time) const {
    std::vector<uint8_t> record(sizeof(perf_event_header));
    append(record, body_.data(), body_.size());
    const uint32_t ids[2] = {77, 78};
    append(record, ids, sizeof ids);
    append(record, &time, sizeof time);
    perf_event_header header{type, misc, static_cast<uint16_t>(record.size())};
    std::memcpy(record.data(), &header, sizeof header);
    return record;
  }

 private:
  static void append(std::vector<uint8_t>& to, const void* bytes, size_t count) {
    size_t at = to.size();
    to.resize(at + count);
    if (count > 0) std::memcpy(to.data() + at, bytes, count);
  }
  std::vector<uint8_t> body_;
};

struct FileIdentity {
  uint8_t bytes[24] = {};
};

FileIdentity device_and_inode(uint32_t major, uint32_t minor, uint64_t ino) {
  FileIdentity identity;
  std::memcpy(identity.bytes, &major, 4);
  std::memcpy(identity.bytes + 4, &minor, 4);
  std::memcpy(identity.bytes + 8, &ino, 8);
  return identity;
}

FileIdentity build_id_of_size(uint8_t size) {
  FileIdentity identity;
  identity.bytes[0] = size;
  for (uint8_t i = 0; i < 20; ++i) identity.bytes[4 + i] = static_cast<uint8_t>(0xa0 + i);
  return identity;
}

std::vector<uint8_t> mmap2(uint16_t misc, const FileIdentity& identity, uint32_t prot, const std::string& path,
                           bool terminate = true) {
  RecordBuilder builder;
  builder.put(uint32_t{77}).put(uint32_t{78}).put(uint64_t{0x7f0000001000}).put(uint64_t{0x3000});
  builder.put(uint64_t{0x2000}).put(identity).put(prot).put(uint32_t{MAP_PRIVATE});
  builder.put_string(path, terminate);
  return builder.finish(PERF_RECORD_MMAP2, misc, 123456789);
}

TEST(MappingCollection, DecodesMappingsWithABuildIdOrADeviceAndInode) {
  PerfRecord by_build_id =
      decode_perf_record(mmap2(PERF_RECORD_MISC_MMAP_BUILD_ID, build_id_of_size(20), PROT_READ | PROT_EXEC, "/lib/x.so"));
  ASSERT_EQ(by_build_id.kind, PerfRecord::Kind::Mapping);
  EXPECT_EQ(by_build_id.timestamp, 123456789u);
  EXPECT_EQ(by_build_id.event.type, EventType::Mapping);
  EXPECT_EQ(by_build_id.event.pid, 77);
  EXPECT_EQ(by_build_id.event.tid, 78);
  EXPECT_EQ(by_build_id.event.timestamp, 123456789u);
  EXPECT_EQ(by_build_id.event.addr, 0x7f0000001000u);
  const MappingInfo& m = *by_build_id.mapping;
  EXPECT_EQ(m.len, 0x3000u);
  EXPECT_EQ(m.file_offset, 0x2000u);
  EXPECT_EQ(m.build_id.size(), 20u);
  EXPECT_EQ(m.build_id.front(), 0xa0);
  EXPECT_EQ(m.build_id.back(), 0xb3);
  EXPECT_EQ(m.dev, 0u);
  EXPECT_EQ(m.ino, 0u);
  EXPECT_EQ(m.prot, unsigned(PROT_READ | PROT_EXEC));
  EXPECT_EQ(m.path, "/lib/x.so");
  EXPECT_FALSE(m.new_image);

  PerfRecord by_inode = decode_perf_record(mmap2(0, device_and_inode(259, 3, 12345), PROT_EXEC, "/usr/bin/x"));
  ASSERT_EQ(by_inode.kind, PerfRecord::Kind::Mapping);
  EXPECT_EQ(by_inode.mapping->dev, (uint64_t{259} << 20) | 3);
  EXPECT_EQ(by_inode.mapping->ino, 12345u);
  EXPECT_TRUE(by_inode.mapping->build_id.empty());
  // A path that exactly fills its 8-byte slots still has its terminator.
  EXPECT_EQ(decode_perf_record(mmap2(0, {}, PROT_EXEC, "/1234567")).mapping->path, "/1234567");
}

TEST(MappingCollection, SkipsWhatIsNotFileCode) {
  for (const char* path : {"//anon", "[vdso]", "[heap]", "relative"})
    EXPECT_EQ(decode_perf_record(mmap2(0, {}, PROT_READ | PROT_EXEC, path)).kind, PerfRecord::Kind::Other) << path;
  EXPECT_EQ(decode_perf_record(mmap2(0, {}, PROT_READ | PROT_WRITE, "/data")).kind, PerfRecord::Kind::Other);
  RecordBuilder lost;
  lost.put(uint64_t{1}).put(uint64_t{5});
  EXPECT_EQ(decode_perf_record(lost.finish(PERF_RECORD_LOST, 0, 1)).kind, PerfRecord::Kind::Other);
}

TEST(MappingCollection, FlagsMalformedRecords) {
  EXPECT_EQ(decode_perf_record(mmap2(0, {}, PROT_EXEC, "/no/terminator", false)).kind,
            PerfRecord::Kind::Malformed);
  EXPECT_EQ(decode_perf_record(mmap2(PERF_RECORD_MISC_MMAP_BUILD_ID, build_id_of_size(21), PROT_EXEC, "/x")).kind,
            PerfRecord::Kind::Malformed);
  RecordBuilder too_short;
  too_short.put(uint64_t{0});
  EXPECT_EQ(decode_perf_record(too_short.finish(PERF_RECORD_MMAP2, 0, 1)).kind, PerfRecord::Kind::Malformed);
  EXPECT_EQ(decode_perf_record(RecordBuilder().finish(PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC, 1)).kind,
            PerfRecord::Kind::Malformed);
}

TEST(MappingCollection, AnExecCommRecordMarksTheExecOthersDoNot) {
  RecordBuilder comm;
  comm.put(uint32_t{77}).put(uint32_t{77}).put_string("true");
  PerfRecord exec = decode_perf_record(comm.finish(PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC, 99));
  EXPECT_EQ(exec.kind, PerfRecord::Kind::Exec);
  EXPECT_EQ(exec.pid, 77);
  EXPECT_EQ(exec.timestamp, 99u);
  EXPECT_EQ(decode_perf_record(comm.finish(PERF_RECORD_COMM, 0, 99)).kind, PerfRecord::Kind::Other);  // a rename
}

TEST(MappingCollection, CpuLists) {
  EXPECT_EQ(parse_cpu_list("0\n"), (std::vector<int>{0}));
  EXPECT_EQ(parse_cpu_list("0-3"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(parse_cpu_list("0-1,4,6-7\n"), (std::vector<int>{0, 1, 4, 6, 7}));
  for (const char* malformed : {"", "\n", "a", "3-1", "1,", ",1", "1--2", "-1", "1-", "0 1"})
    EXPECT_THROW(parse_cpu_list(malformed), std::invalid_argument) << '"' << malformed << '"';
}

}  // namespace
}  // namespace memtrack::testing
