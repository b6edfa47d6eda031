// The interposer fast path (record's default, src/interpose/) against the
// uprobe path: the same fixtures recorded both ways give the same report
// figures per process; the interposer serves dynamically linked processes
// whose allocator is glibc's or a shared jemalloc, mimalloc or tcmalloc (their
// own names and operators included) and leaves the rest to the uprobes
// (allocators linked into the executable); a user's LD_PRELOAD is kept,
// after ours; the library depends on libc alone (no phantom allocation of a
// C++ runtime). record_test runs its fidelity tests on both paths as well.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "fast_path_common.h"

namespace memtrack::testing {
namespace {

using FastPath = FastPathTest;

// The report's figures of each process, in order of start, without what
// differs from run to run (pids, times).
nlohmann::json process_figures(const std::string& artifact) {
  RunResult r = run_process({MEMTRACK_BIN, "report", "--format", "json", artifact}, std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code(), 0) << r.err;
  nlohmann::json report = nlohmann::json::parse(r.out);
  nlohmann::json figures = nlohmann::json::array();
  for (const auto& p : report["processes"]) {
    nlohmann::json f;
    for (const char* key : {"alloc_calls", "calls_by_kind", "free_calls", "realloc_calls", "total_allocated",
                            "peak_memory", "leaked_bytes", "leaked_count", "unmatched_frees", "histogram",
                            "temporary_allocations", "inherited_unfreed_bytes", "inherited_unfreed_count",
                            "exit_code", "command"})
      f[key] = p[key];
    figures.push_back(f);
  }
  return figures;
}

BothPaths<nlohmann::json> record_both(const TempDir& dir, const std::vector<std::string>& command) {
  return record_both_paths(dir, command, {}, process_figures);
}

TEST_F(FastPath, SameFiguresOnBothPathsForEveryFixture) {
  const std::vector<std::vector<std::string>> fixtures = {
      {FX_LIBC, "all"},
      {FX_LIBC, "fork"},
      {FX_LIBC, "forkexec", FX_LIBC},
      {FX_LIBC, "vforkexec", FX_LIBC},
      {FX_LIBC, "spawnexec", FX_LIBC},
      {FX_LIBC, "count", "20000"},
      {FX_CPP, "all"},
      {FX_CPP, "badalloc"},
      {FX_CPP, "nothrow_fail"},
  };
  for (const auto& command : fixtures) {
    SCOPED_TRACE(command[0] + " " + command[1]);
    auto b = record_both(dir_, command);
    ASSERT_TRUE(clean_read(b.fast.rec));
    EXPECT_TRUE(no_losses(b.fast.rec));
    EXPECT_TRUE(no_losses(b.uprobes.rec));
    // Every process of the tree used the interposer, none of the uprobe run did.
    EXPECT_EQ(counter(b.fast.rec, "interposed_processes"), b.fast_view.size());
    EXPECT_EQ(counter(b.uprobes.rec, "interposed_processes"), 0u);
    EXPECT_GT(counter(b.fast.rec, "interposer_events"), 0u);
    EXPECT_EQ(b.fast_view, b.uprobe_view) << "fast path:\n"
                                                << b.fast_view.dump(1) << "\nuprobes:\n"
                                                << b.uprobe_view.dump(1);
  }
}

// A program built with AddressSanitizer aborts when a library comes before
// its runtime ("ASan runtime does not come first"): recorded, it runs as
// untraced (same status and output), on the uprobes, alone or under a shell,
// with the same figures as --uprobes gives, and the summary says why.
TEST_F(FastPath, SanitizerBuiltProgramRunsAsUntracedOnTheUprobes) {
  SpawnOptions options;
  options.env = {{"ASAN_OPTIONS", "detect_leaks=0"}};
  std::vector<std::string> command = {FX_LIBC_ASAN, "count", "1000"};
  RunResult untraced = run_process(command, std::chrono::seconds(60), options);
  ASSERT_EQ(untraced.exit_code(), 0) << untraced.describe();
  for (const auto& wrapped : {command, std::vector<std::string>{"/bin/sh", "-c", std::string(FX_LIBC_ASAN) + " count 1000"}}) {
    std::vector<std::string> argv = {MEMTRACK_BIN, "record", "-o", dir_.file("fast.zst"), "--"};
    argv.insert(argv.end(), wrapped.begin(), wrapped.end());
    RunResult fast = run_process(argv, std::chrono::seconds(60), options);
    EXPECT_EQ(fast.exit_code(), untraced.exit_code()) << fast.describe();
    EXPECT_EQ(fast.err.find("does not come first"), std::string::npos) << fast.describe();
    EXPECT_NE(fast.err.find("needs libasan.so"), std::string::npos) << fast.describe();
    EXPECT_NE(fast.err.find("recorded by uprobes, without the interposer"), std::string::npos) << fast.describe();
    EXPECT_NE(fast.out.find(" count 1000"), std::string::npos) << fast.describe();
  }
  Recorded uprobes = record_command(dir_, command, std::chrono::seconds(60), options, {"--uprobes"});
  ASSERT_EQ(uprobes.run.exit_code(), 0) << uprobes.run.describe();
  nlohmann::json uprobe_figures = process_figures(dir_.file("a.zst"));
  Recorded fast = record_command(dir_, command, std::chrono::seconds(60), options);
  ASSERT_EQ(fast.run.exit_code(), 0) << fast.run.describe();
  nlohmann::json fast_figures = process_figures(dir_.file("a.zst"));
  ASSERT_EQ(fast_figures.size(), 1u);
  EXPECT_EQ(fast_figures, uprobe_figures);
  EXPECT_GE(fast_figures[0]["alloc_calls"].get<uint64_t>(), 1000u);
}

// Under an address-space limit (ulimit -v) a program gets as far recorded as
// untraced: the interposer's ~1.1 GB of reserved address space would stop it
// sooner (issue 29: 1,037 blocks of 1 MiB instead of 1,942), so a process
// started with a limit stays on the uprobes, and the trailer counts it. The
// shell that sets the limit had none: it is interposed.
TEST_F(FastPath, UnderAnAddressSpaceLimitTheProgramGetsAsFarAsUntraced) {
  const std::string limited = std::string("ulimit -v 2000000 && exec ") + FX_ADDRESS_SPACE;
  std::vector<std::string> command = {"/bin/sh", "-c", limited};
  RunResult untraced = run_process(command, std::chrono::seconds(60));
  ASSERT_EQ(untraced.exit_code(), 0) << untraced.describe();
  int untraced_blocks = 0, recorded_blocks = 0;
  ASSERT_EQ(std::sscanf(untraced.out.c_str(), "blocks %d", &untraced_blocks), 1) << untraced.describe();
  ASSERT_GT(untraced_blocks, 100) << "the limit leaves room for the program";
  Recorded r = record_command(dir_, command, std::chrono::seconds(120));
  ASSERT_EQ(r.run.exit_code(), 0) << r.run.describe();
  ASSERT_EQ(std::sscanf(r.run.out.c_str(), "blocks %d", &recorded_blocks), 1) << r.run.describe();
  // The uprobes put one page in the program ([uprobes]); glibc's arenas
  // round the rest.
  EXPECT_LE(std::abs(recorded_blocks - untraced_blocks), 2) << "untraced " << untraced_blocks << ", recorded "
                                                            << recorded_blocks;
  EXPECT_EQ(counter(r.rec, "interposer_address_limited"), 1u);
  EXPECT_EQ(counter(r.rec, "interposed_processes"), 1u) << "the shell, which set the limit";
  EXPECT_TRUE(no_losses(r.rec));
}

// A fully static executable (no dynamic loader: nothing to preload) and a
// setuid one (the loader ignores LD_PRELOAD for it) stay on the uprobes:
// recorded exactly, by the kernel.
TEST_F(FastPath, StaticAndSetuidExecutablesStayOnTheUprobes) {
  std::string setuid_copy = dir_.file("fx_libc_setuid");
  std::filesystem::copy_file(FX_LIBC, setuid_copy);
  ASSERT_EQ(chown(setuid_copy.c_str(), 65534, 65534), 0) << std::strerror(errno);
  ASSERT_EQ(chmod(setuid_copy.c_str(), 04755), 0) << std::strerror(errno);
  struct statvfs mount {};
  ASSERT_EQ(statvfs(dir_.path().c_str(), &mount), 0);
  if (mount.f_flag & ST_NOSUID) GTEST_SKIP() << "*** SKIPPED: " << dir_.path() << " is on a nosuid mount ***";
  for (const std::string& program : {std::string(FX_LIBC_STATIC), setuid_copy}) {
    SCOPED_TRACE(program);
    Recorded r = record_command(dir_, {program, "count", "1000"}, std::chrono::seconds(60));
    ASSERT_EQ(r.run.exit_code(), 0) << r.run.describe();
    EXPECT_TRUE(no_losses(r.rec));
    EXPECT_EQ(counter(r.rec, "interposed_processes"), 0u);
    EXPECT_EQ(counter(r.rec, "interposer_events"), 0u);
    // `count N`: N malloc(64)+free pairs, and the FNV-1a hash of their
    // addresses, which the recorded pairs must give too.
    GroundTruth gt = parse_ground_truth(r.run.out);
    ASSERT_EQ(gt.info.size(), 3u) << r.run.describe();
    int pid = gt.info.begin()->first.first;
    ASSERT_EQ(gt.info1(pid, "count"), "1000");
    std::vector<Event> window;
    ASSERT_TRUE(marker_window(r.rec.events, pid, &window));
    ASSERT_EQ(window.size(), 2000u);
    uint64_t hash = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < window.size(); ++i) {
      const Event& e = window[i];
      EXPECT_EQ(e.type, i % 2 == 0 ? EventType::Malloc : EventType::Free) << "#" << i << ": " << describe(e);
      for (int b = 0; b < 8; ++b) {
        hash ^= (e.addr >> (8 * b)) & 0xff;
        hash *= 0x100000001b3ull;
      }
    }
    EXPECT_EQ(hash, std::stoull(gt.info1(pid, "hash"), nullptr, 16));
  }
}

// The figures of a process that do not depend on how its threads interleave
// (its peak and temporary allocations do).
void expect_same_counts(const nlohmann::json& fast, const nlohmann::json& uprobes) {
  for (const char* key : {"alloc_calls", "calls_by_kind", "free_calls", "unmatched_frees", "total_allocated",
                          "leaked_bytes", "leaked_count", "exit_code"})
    EXPECT_EQ(fast[key], uprobes[key]) << key;
}

TEST_F(FastPath, ThreadsExitingAndTheirChunksReused) {
  // 8 threads come and go: their chunks are retired at exit and freed once
  // drained; every event is there.
  auto b = record_both(dir_, {FX_LIBC, "threads", "8", "2000"});
  EXPECT_TRUE(no_losses(b.fast.rec));
  EXPECT_EQ(counter(b.fast.rec, "interposed_processes"), 1u);
  EXPECT_GE(counter(b.fast.rec, "interposer_chunks_freed"), 9u);  // 8 threads and the main one
  ASSERT_EQ(b.fast_view.size(), 1u);
  ASSERT_EQ(b.uprobe_view.size(), 1u);
  const auto &fast = b.fast_view[0], &uprobes = b.uprobe_view[0];
  // The same blocks: the interposer keeps its per-thread state without TLS
  // (a TLS block would make the DTV pthread_create callocs 16 bytes bigger).
  expect_same_counts(fast, uprobes);
}

// An exiting thread's tcache is freed by glibc itself, with direct calls no
// symbol interposes (tcache_thread_shutdown): the blocks the program freed
// already, then the cache, which malloc never returned. Those are the
// runtime's frees, not the program's: both paths count the same frees and
// allocations and no unmatched free; the uprobe run counts what it left out.
TEST_F(FastPath, ExitingThreadsTcacheIsNotTheProgramsFrees) {
  constexpr int64_t kTcacheBlocks = 64 * 7;  // what each thread of the fixture frees into its cache
  for (int64_t threads : {8, 200}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    auto b = record_both(dir_, {FX_LIBC, "tcachethreads", std::to_string(threads)});
    ASSERT_TRUE(clean_read(b.uprobes.rec));
    ASSERT_TRUE(clean_read(b.fast.rec));
    EXPECT_TRUE(no_losses(b.uprobes.rec));
    EXPECT_TRUE(no_losses(b.fast.rec));
    EXPECT_EQ(counter(b.fast.rec, "interposed_processes"), 1u);
    ASSERT_EQ(b.fast_view.size(), 1u);
    ASSERT_EQ(b.uprobe_view.size(), 1u);
    const auto &fast = b.fast_view[0], &uprobes = b.uprobe_view[0];
    expect_same_counts(fast, uprobes);
    EXPECT_EQ(uprobes["unmatched_frees"], 0);
    EXPECT_GE(uprobes["free_calls"].get<int64_t>(), threads * kTcacheBlocks);
    EXPECT_GE(uprobes["alloc_calls"].get<int64_t>(), threads * kTcacheBlocks);
    // Each thread's cache itself and the blocks still in it: all 448 when
    // the threads run one at a time, some fewer when they contend (hardware
    // breakpoints on glibc's two calls counted 89,020-89,168 blocks of 89,600
    // for 200 threads, 200 caches).
    const uint64_t left_out = counter(b.uprobes.rec, "runtime_frees_left_out");
    EXPECT_GE(left_out, static_cast<uint64_t>(threads));
    EXPECT_LE(left_out, static_cast<uint64_t>(threads * (kTcacheBlocks + 1)));
  }
}

TEST_F(FastPath, AllocatorOtherThanGlibcStaysWithTheUprobes) {
  if (std::string(FX_JEMALLOC_STATIC).empty()) GTEST_SKIP() << "jemalloc fixture not built";
  // The executable defines malloc itself: the interposer is not the first
  // definition, so it stays out and the uprobes record the process.
  Recorded r = record_command(dir_, {FX_JEMALLOC_STATIC}, std::chrono::seconds(60));
  ASSERT_EQ(r.run.exit_code(), 0) << r.run.err;
  EXPECT_TRUE(no_losses(r.rec));
  EXPECT_EQ(counter(r.rec, "interposed_processes"), 0u);
  EXPECT_EQ(counter(r.rec, "interposer_not_first"), 1u);  // it found out at load
  EXPECT_EQ(counter(r.rec, "interposer_events"), 0u);
  GroundTruth gt = parse_ground_truth(r.run.out);
  ASSERT_FALSE(gt.pids().empty());
  std::vector<Event> window;
  ASSERT_TRUE(marker_window(r.rec.events, gt.pids().front(), &window));
  EXPECT_TRUE(same_events(window, gt.of(gt.pids().front())));
}

// Both runs read cleanly, lost nothing and give the same figures; whether
// the fast run's process was interposed.
void expect_same_figures(const BothPaths<nlohmann::json>& b, bool interposed) {
  ASSERT_TRUE(clean_read(b.fast.rec));
  EXPECT_TRUE(no_losses(b.fast.rec));
  EXPECT_TRUE(no_losses(b.uprobes.rec));
  EXPECT_EQ(counter(b.fast.rec, "interposed_processes"), interposed ? 1u : 0u);
  EXPECT_EQ(counter(b.fast.rec, "interposer_not_first"), interposed ? 0u : 1u);
  EXPECT_EQ(counter(b.fast.rec, "interposer_events") > 0, interposed);
  ASSERT_FALSE(b.fast_view.empty());
  EXPECT_GT(b.fast_view[0]["alloc_calls"].get<int64_t>(), 0);
  EXPECT_EQ(b.fast_view, b.uprobe_view) << "fast path:\n"
                                        << b.fast_view.dump(1) << "\nuprobes:\n"
                                        << b.uprobe_view.dump(1);
}

// The fast run's events between the fixture's markers are exactly its ground
// truth, after `leading` events of its own (a bad_alloc's: libstdc++
// allocates and frees the exception, as on the uprobe path).
void expect_ground_truth(const Recorded& fast, size_t leading = 0) {
  GroundTruth gt = parse_ground_truth(fast.run.out);
  ASSERT_EQ(gt.pids().size(), 1u);
  std::vector<Event> window;
  ASSERT_TRUE(marker_window(fast.rec.events, gt.pids().front(), &window));
  const std::vector<Event>& expected = gt.of(gt.pids().front());
  ASSERT_EQ(window.size(), expected.size() + leading);
  EXPECT_TRUE(same_events(std::vector<Event>(window.begin() + static_cast<long>(leading), window.end()), expected));
}

// Allocators linked into the executable (jemalloc, tcmalloc): its malloc
// comes before ours, the interposer stays out, the uprobes record the
// process, and the figures are those of the uprobe path.
void expect_same_figures_on_the_uprobes(const TempDir& dir, const std::vector<std::string>& command) {
  expect_same_figures(record_both(dir, command), false);
}

TEST_F(FastPath, JemallocLinkedInGivesTheUprobeFigures) {
  if (std::string(FX_JEMALLOC_STATIC).empty()) GTEST_SKIP() << "jemalloc fixture not built";
  expect_same_figures_on_the_uprobes(dir_, {FX_JEMALLOC_STATIC});
}

TEST_F(FastPath, TcmallocLinkedInGivesTheUprobeFigures) {
  if (std::string(FX_TCMALLOC_STATIC).empty()) GTEST_SKIP() << "tcmalloc fixture not built";
  expect_same_figures_on_the_uprobes(dir_, {FX_TCMALLOC_STATIC});
}

// An allocator as a shared library (mimalloc, jemalloc, tcmalloc: malloc,
// their own names, their operator new and delete): the interposer takes
// every name, the process is interposed, nothing traps, and the fast run's
// events between the markers are exactly the fixture's ground truth (one
// event per call, through the aliases: mimalloc's free is also _ZdlPv) and
// its figures those of the uprobe path.
void expect_interposed_with_the_uprobe_figures(const TempDir& dir, const std::vector<std::string>& command,
                                               bool bad_alloc = false) {
  auto b = record_both(dir, command);
  expect_same_figures(b, true);
  expect_ground_truth(b.fast, bad_alloc ? 2 : 0);
}

TEST_F(FastPath, MimallocLibraryIsInterposedWithTheUprobeFigures) {
  if (std::string(FX_MIMALLOC).empty()) GTEST_SKIP() << "mimalloc fixture not built";
  expect_interposed_with_the_uprobe_figures(dir_, {FX_MIMALLOC});
}

TEST_F(FastPath, JemallocLibraryIsInterposedWithTheUprobeFigures) {
  if (std::string(FX_JEMALLOC_SHARED).empty()) GTEST_SKIP() << "jemalloc library fixture not built";
  expect_interposed_with_the_uprobe_figures(dir_, {FX_JEMALLOC_SHARED});
}

TEST_F(FastPath, TcmallocLibraryIsInterposedWithTheUprobeFigures) {
  if (std::string(FX_TCMALLOC_SHARED).empty()) GTEST_SKIP() << "tcmalloc library fixture not built";
  expect_interposed_with_the_uprobe_figures(dir_, {FX_TCMALLOC_SHARED});
}

// The allocator's own operator new throws bad_alloc through the interposer's
// wrapper (its depth is reset when the exception begins, as the kernel does
// on the uprobe path): the failed call records nothing and the allocation
// after it is recorded.
TEST_F(FastPath, AllocatorsOperatorNewThrowingThroughTheWrapper) {
  for (const std::string fixture : {FX_JEMALLOC_SHARED, FX_TCMALLOC_SHARED}) {
    if (fixture.empty()) GTEST_SKIP() << "an allocator library fixture is not built";
    SCOPED_TRACE(fixture);
    expect_interposed_with_the_uprobe_figures(dir_, {fixture, "badalloc"}, true);
  }
}

// A C program dlopens a C++ library after the interposer looked its names up:
// the library's calls to operator new[]/delete[] reach the interposer's, which
// find libstdc++'s then and jump there (they would call nothing before the
// fix); libstdc++'s malloc and free record, exactly as on the uprobe path.
TEST_F(FastPath, CppLibraryLoadedLaterReachesItsOperators) {
  auto b = record_both(dir_, {FX_LIBC, "dlopencpp", FX_CPP_PLUGIN});
  expect_same_figures(b, true);
  expect_ground_truth(b.fast);
}

TEST_F(FastPath, NonPieExecutableTakingMallocsAddressIsInterposed) {
  // Its PLT entry is malloc's canonical address, not a definition: the
  // interposer is still the first malloc (it was refused before the fix, and
  // Debian's python3 ran on the uprobes).
  auto b = record_both(dir_, {FX_MALLOC_ADDRESS});
  EXPECT_EQ(counter(b.fast.rec, "interposed_processes"), 1u);
  EXPECT_EQ(counter(b.fast.rec, "interposer_not_first"), 0u);
  EXPECT_EQ(b.fast_view, b.uprobe_view);
}

TEST_F(FastPath, UsersOwnPreloadIsKeptAfterOurs) {
  Recorded r = record_command(dir_, {"/bin/sh", "-c", "echo \"$LD_PRELOAD\""}, std::chrono::seconds(60),
                              {"", {{"LD_PRELOAD", FX_FAKEALLOC}}});
  ASSERT_EQ(r.run.exit_code(), 0) << r.run.err;
  std::string preload = r.run.out.substr(0, r.run.out.find('\n'));
  std::string ours = preload.substr(0, preload.find(' '));
  EXPECT_TRUE(ours.ends_with("/libmemtrack-interpose.so")) << preload;
  EXPECT_EQ(preload.substr(preload.find(' ') + 1), FX_FAKEALLOC) << preload;
  EXPECT_EQ(counter(r.rec, "interposed_processes"), 1u);
}

// The report says which way each process was recorded (Interposed records,
// docs/FORMAT.md §2.6): the fast path by default, the uprobes with
// --uprobes, and both for env (interposed) exec'ing the fixture without
// LD_PRELOAD.
TEST_F(FastPath, ReportSaysWhichPathRecordedEachProcess) {
  auto recorded_by = [&](const std::vector<std::string>& command, const std::vector<std::string>& options) {
    Recorded r = record_command(dir_, command, std::chrono::seconds(60), {}, options);
    EXPECT_EQ(r.run.exit_code(), 0) << r.run.err;
    size_t interposed_records = 0;
    for (const Event& e : r.rec.events) interposed_records += e.type == EventType::Interposed;
    RunResult report = run_process({MEMTRACK_BIN, "report", "--format", "json", dir_.file("a.zst")},
                                   std::chrono::seconds(60));
    EXPECT_EQ(report.exit_code(), 0) << report.err;
    nlohmann::json processes = nlohmann::json::parse(report.out)["processes"];
    EXPECT_EQ(processes.size(), 1u) << processes.dump();
    RunResult text = run_process({MEMTRACK_BIN, "report", dir_.file("a.zst")}, std::chrono::seconds(60));
    std::string header_line = text.out.substr(text.out.find("recorded by"));
    header_line = header_line.substr(0, header_line.find('\n'));
    return std::tuple(processes.empty() ? std::string() : processes[0]["recorded_by"].get<std::string>(),
                      interposed_records, header_line);
  };
  const std::vector<std::string> fixture = {FX_LIBC, "count", "100"};
  auto [fast, fast_records, fast_header] = recorded_by(fixture, {});
  EXPECT_EQ(fast, "interposer");
  EXPECT_EQ(fast_records, 1u);
  EXPECT_NE(fast_header.find("the fast path"), std::string::npos) << fast_header;
  auto [uprobes, uprobe_records, uprobe_header] = recorded_by(fixture, {"--uprobes"});
  EXPECT_EQ(uprobes, "uprobes");
  EXPECT_EQ(uprobe_records, 0u);
  EXPECT_NE(uprobe_header.find("uprobes"), std::string::npos) << uprobe_header;
  std::vector<std::string> unpreloaded = {"/usr/bin/env", "-u", "LD_PRELOAD"};
  unpreloaded.insert(unpreloaded.end(), fixture.begin(), fixture.end());
  auto [both, both_records, both_header] = recorded_by(unpreloaded, {});
  EXPECT_EQ(both, "both");
  EXPECT_EQ(both_records, 1u);  // env's
}

TEST_F(FastPath, InterposerNeedsNothingButLibc) {
  // heaptrack's preload brings libstdc++, whose emergency exception pool is a
  // 72,704-byte allocation in every program it records; ours links nothing
  // that could allocate on its own.
  std::string library = std::string(MEMTRACK_BIN).substr(0, std::string(MEMTRACK_BIN).rfind('/')) +
                        "/libmemtrack-interpose.so";
  RunResult r = run_process({"/usr/bin/readelf", "-d", library}, std::chrono::seconds(30));
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  std::vector<std::string> needed;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (line.find("(NEEDED)") != std::string::npos) needed.push_back(line.substr(line.find('[') + 1));
  ASSERT_EQ(needed.size(), 1u) << r.out;
  EXPECT_EQ(needed[0], "libc.so.6]");
}

}  // namespace
}  // namespace memtrack::testing
