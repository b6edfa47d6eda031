// Call paths on the fast path (record --stacks): the interposer
// walks its own stack with the rules the recorder shares, as the kernel's
// walker does on the uprobe path. The same fixtures recorded with --stacks
// both ways give the same report: the same sites (frames and costs) and the
// same figures per process, including the paths whose walk stops short (a
// signal frame) and go through the raw copy. (Each fixture is recorded twice:
// the list is short, for CI's time.)
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fast_path_common.h"

namespace memtrack::testing {
namespace {

using FastPathStacks = FastPathTest;

// What the report says, without what differs from run to run (pids, times,
// addresses): each process's figures in order of start, and the sites as a
// sorted list of their costs and frames.
struct ReportView {
  nlohmann::json processes = nlohmann::json::array();
  std::vector<std::string> sites;
  nlohmann::json outcomes;
};

ReportView report_view(const std::string& artifact) {
  RunResult r = run_process({MEMTRACK_BIN, "report", "--format", "json", "--top", "0", artifact},
                            std::chrono::seconds(120));
  EXPECT_EQ(r.exit_code(), 0) << r.err;
  ReportView view;
  nlohmann::json report = nlohmann::json::parse(r.out);
  for (const auto& p : report["processes"]) {
    nlohmann::json f;
    for (const char* key : {"alloc_calls", "calls_by_kind", "free_calls", "unmatched_frees", "total_allocated",
                            "peak_memory", "leaked_bytes", "leaked_count", "histogram", "exit_code", "command"})
      f[key] = p[key];
    view.processes.push_back(f);
  }
  const nlohmann::json& profile = report["profile"];
  EXPECT_TRUE(profile.is_object()) << "no call paths in the report";
  if (!profile.is_object()) return view;
  for (const auto& site : profile["sites"]) {
    nlohmann::json s;
    s["costs"] = site["costs"];
    s["allocating_function"] = site["allocating_function"];
    s["outcome"] = site["outcome"];
    for (const auto& frame : site["frames"])
      s["frames"].push_back({frame["label"], frame["file"], frame["line"], frame["inlined"], frame["module"]});
    view.sites.push_back(s.dump());
  }
  std::sort(view.sites.begin(), view.sites.end());
  view.outcomes = profile["stack_outcomes"]["allocations"];
  return view;
}

BothPaths<ReportView> record_both(const TempDir& dir, const std::vector<std::string>& command) {
  return record_both_paths(dir, command, {"--stacks"}, report_view, std::chrono::seconds(120));
}

std::string lines(const std::vector<std::string>& sites) {
  std::string out;
  for (const std::string& s : sites) out += s + "\n";
  return out;
}

// The same figures per process and the same sites on both paths.
void expect_same_report(const BothPaths<ReportView>& b) {
  EXPECT_EQ(b.fast_view.processes, b.uprobe_view.processes) << "fast path:\n"
                                                            << b.fast_view.processes.dump(1) << "\nuprobes:\n"
                                                            << b.uprobe_view.processes.dump(1);
  EXPECT_EQ(b.fast_view.sites, b.uprobe_view.sites) << "fast path:\n"
                                                    << lines(b.fast_view.sites) << "\nuprobes:\n"
                                                    << lines(b.uprobe_view.sites);
}

TEST_F(FastPathStacks, SameCallPathsAndFiguresOnBothPaths) {
  const std::vector<std::vector<std::string>> fixtures = {
      // 5 frames; 150 (past the copy budget); 300 (past the frame limit: frame-limit).
      {FX_CALLPATHS, "depth", "5", "150", "300"},
      {FX_CALLPATHS, "shlib"},
      // The plugin is mapped after start: the module table follows.
      {FX_CALLPATHS, "dlopen", FX_CALLPATHS_PLUGIN},
      // The walk stops at the signal frame: the raw copy goes offline.
      {FX_CALLPATHS, "signal"},
      {FX_STACKS, "4", "50", "10", "2"},
      // operator new, and a fork: the child defines its own paths.
      {FX_CPP, "all"},
      {FX_LIBC, "fork"},
  };
  for (const auto& command : fixtures) {
    SCOPED_TRACE(command[0] + " " + command[1]);
    auto b = record_both(dir_, command);
    ASSERT_TRUE(clean_read(b.fast.rec));
    EXPECT_TRUE(no_losses(b.fast.rec));
    EXPECT_TRUE(no_losses(b.uprobes.rec));
    // The fast run's processes used the interposer, and it walked.
    EXPECT_EQ(counter(b.fast.rec, "interposed_processes"), b.fast_view.processes.size());
    EXPECT_GT(counter(b.fast.rec, "interposer_events"), 0u);
    EXPECT_GT(counter(b.fast.rec, "interposer_stack_definitions"), 0u);
    EXPECT_EQ(counter(b.fast.rec, "interposer_stack_definitions_lost"), 0u);
    expect_same_report(b);
  }
}

// Allocators' own entry points (operator new and delete of jemalloc and
// tcmalloc, mallocx, tc_*, mi_*) recorded by the interposer's wrappers: the
// call paths start at the program's call, as the kernel's do at the probe.
TEST_F(FastPathStacks, AllocatorLibrariesGiveTheSameCallPaths) {
  for (const std::string fixture : {FX_JEMALLOC_SHARED, FX_TCMALLOC_SHARED, FX_MIMALLOC}) {
    if (fixture.empty()) GTEST_SKIP() << "an allocator fixture is not built (its library is missing)";
    SCOPED_TRACE(fixture);
    auto b = record_both(dir_, {fixture});
    EXPECT_TRUE(no_losses(b.fast.rec));
    EXPECT_EQ(counter(b.fast.rec, "interposed_processes"), 1u);
    expect_same_report(b);
  }
}

TEST_F(FastPathStacks, RepeatedPathsAreDefinedOncePerProcess) {
  // 4 paths x 2000 rounds on one thread: a handful of definitions, every
  // allocation walked to completion.
  Recorded r = record_command(dir_, {FX_STACKS, "4", "2000", "3", "0"}, std::chrono::seconds(120), {},
                              {"--stacks"});
  ASSERT_EQ(r.run.exit_code(), 0) << r.run.err;
  EXPECT_EQ(counter(r.rec, "interposed_processes"), 1u);
  EXPECT_GE(counter(r.rec, "interposer_walks_complete"), 8000u);
  EXPECT_LT(counter(r.rec, "interposer_stack_definitions"), 200u);
  // The files' prepared rules are read from their regions of the table: most
  // of those prepared in this run (how many depends on the files, not fixed).
  EXPECT_GT(counter(r.rec, "interposer_rules_in_regions"), 0u);
  EXPECT_GE(2 * counter(r.rec, "interposer_rules_in_regions"), counter(r.rec, "unwind_rules_prepared"));
  size_t stacks = 0, with_hash = 0, allocations = 0;
  for (const Event& e : r.rec.events) {
    if (e.type == EventType::Stack) ++stacks;
    if (is_allocation(e.type)) {
      ++allocations;
      if (e.stack_hash != 0) ++with_hash;
    }
  }
  EXPECT_EQ(with_hash, allocations);
  EXPECT_GE(stacks, counter(r.rec, "interposer_stack_definitions"));
}

TEST_F(FastPathStacks, AProcessLeftOnTheUprobesGetsTheKernelWalksRules) {
  // env (interposed) runs the fixture without LD_PRELOAD: it stays with the
  // uprobes, and the kernel, which gets prepared rules only when its own walk
  // first misses in a file, receives the whole file then: one miss per file,
  // not per path.
  Recorded r = record_command(dir_, {"/usr/bin/env", "-u", "LD_PRELOAD", FX_STACKS, "4", "2000", "3", "0"},
                              std::chrono::seconds(120), {}, {"--stacks"});
  ASSERT_EQ(r.run.exit_code(), 0) << r.run.err;
  EXPECT_EQ(counter(r.rec, "interposed_processes"), 1u);  // env
  // A whole file's rules per miss, not one rule: few misses (a cold rule
  // cache gives a few per file while the files are prepared: 2 warm, 21 cold
  // seen), many rules given.
  uint64_t misses = counter(r.rec, "stack_walks_no_rule");
  EXPECT_LT(misses, 80u) << "1% of the 8,000 walks";
  EXPECT_GT(counter(r.rec, "unwind_rules_given_kernel_on_miss"), 10 * std::max<uint64_t>(misses, 1));
  // Every one of the fixture's 8,000 allocations walked to the end, but for
  // the walks that missed.
  EXPECT_GE(counter(r.rec, "stack_walks_complete") + misses, 8000u);
  EXPECT_LT(counter(r.rec, "stack_definitions"), 100u);
}

// Files' prepared rules kept across recordings (record/unwind_rules/rule_cache.h): the
// first recording derives and stores them, the next reads them instead and
// gives the same call paths; a damaged entry is not used (the rules are
// derived again, the same), and --no-unwind-cache reads nothing.
TEST_F(FastPathStacks, CachedRulesGiveTheSameCallPaths) {
  const std::string cache = dir_.file("cache");
  const SpawnOptions env{"", {{"XDG_CACHE_HOME", cache}}};
  const std::vector<std::string> command = {FX_CALLPATHS, "depth", "5", "150"};
  auto record = [&](std::vector<std::string> options) {
    options.insert(options.begin(), {"--stacks"});
    Recorded r = record_command(dir_, command, std::chrono::seconds(120), env, options);
    EXPECT_EQ(r.run.exit_code(), 0) << r.run.err;
    EXPECT_TRUE(no_losses(r.rec));
    return std::make_pair(r, report_view(dir_.file("a.zst")));
  };
  // A file still queued for preparation when the program ends is left
  // unprepared (the recording needs its rules no more): the counts below are
  // of the files each recording prepared.
  auto prepared = [](const Recording& rec) { return counter(rec, "unwind_files_prepared"); };
  auto seen = [&](const Recording& rec) { return prepared(rec) + counter(rec, "unwind_files_unprepared_at_end"); };
  auto [cold, cold_view] = record({});
  const uint64_t files = seen(cold.rec);
  EXPECT_GT(files, 2u);  // the fixture, libc, the interposer...
  EXPECT_GT(prepared(cold.rec), 0u);
  EXPECT_EQ(counter(cold.rec, "unwind_cache_hits"), 0u);
  EXPECT_EQ(counter(cold.rec, "unwind_cache_stored"), prepared(cold.rec));
  EXPECT_GT(counter(cold.rec, "unwind_prepare_derive_us"), 0u);

  auto [warm, warm_view] = record({});
  EXPECT_EQ(seen(warm.rec), files);
  EXPECT_GT(prepared(warm.rec), 0u);
  const uint64_t hits = counter(warm.rec, "unwind_cache_hits");
  EXPECT_EQ(hits, std::min(prepared(warm.rec), prepared(cold.rec)));
  EXPECT_EQ(counter(warm.rec, "unwind_cache_stored"), prepared(warm.rec) - hits);
  if (prepared(warm.rec) == files && prepared(cold.rec) == files)
    EXPECT_EQ(counter(warm.rec, "unwind_rules_prepared"), counter(cold.rec, "unwind_rules_prepared"));
  EXPECT_GT(counter(warm.rec, "interposer_walks_complete"), 0u);
  EXPECT_EQ(warm_view.sites, cold_view.sites) << "cold:\n" << lines(cold_view.sites) << "\nwarm:\n"
                                              << lines(warm_view.sites);
  EXPECT_EQ(warm_view.processes, cold_view.processes);

  // One byte of each entry's rules changed: none is used.
  uint64_t entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(cache + "/memtrack/unwind-rules")) {
    std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char c = static_cast<char>(f.get() ^ 0x40);
    f.seekp(-1, std::ios::end);
    f.put(c);
    ++entries;
  }
  EXPECT_EQ(entries, std::max(prepared(cold.rec), prepared(warm.rec)));
  auto [again, again_view] = record({});
  EXPECT_EQ(seen(again.rec), files);
  EXPECT_GT(prepared(again.rec), 0u);
  EXPECT_EQ(counter(again.rec, "unwind_cache_hits"), 0u);
  EXPECT_EQ(counter(again.rec, "unwind_cache_rejected"), std::min(prepared(again.rec), entries));
  EXPECT_EQ(counter(again.rec, "unwind_cache_stored"), prepared(again.rec));  // replaced
  EXPECT_EQ(again_view.sites, cold_view.sites);

  auto [off, off_view] = record({"--no-unwind-cache"});
  EXPECT_EQ(counter(off.rec, "unwind_cache_hits"), 0u);
  EXPECT_EQ(counter(off.rec, "unwind_cache_stored"), 0u);
  EXPECT_EQ(off_view.sites, cold_view.sites);
}

TEST_F(FastPathStacks, RawStackModeStaysWithTheUprobes) {
  RunResult r = run_process({MEMTRACK_BIN, "record", "--stacks", "--stack-mode", "raw", "-o",
                             dir_.file("a.zst"), "--", FX_LIBC, "count", "10"},
                            std::chrono::seconds(60));
  ASSERT_EQ(r.exit_code(), 0) << r.err;
  EXPECT_NE(r.err.find("no fast path (--stack-mode raw"), std::string::npos) << r.err;
  Recording rec = read_recording(dir_.file("a.zst"));
  EXPECT_EQ(counter(rec, "interposed_processes"), 0u);
}

}  // namespace
}  // namespace memtrack::testing
