// What `memtrack record -- CMD` gives with no option (issue 25): call paths,
// so the report says where memory was allocated and tells the C/C++
// runtime's own blocks from leaks; and the program's own figures only: the
// RSS and mappings of memtrack's interposer (its events, call paths and their
// caches) are left out and shown apart, so the fast path and the uprobes
// give the program the same mapped and RSS figures. Needs root or
// CAP_BPF+CAP_PERFMON; otherwise every test is reported as skipped, loudly.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recording.h"

namespace memtrack::testing {
namespace {

constexpr uint64_t kPage = 4096;

class Defaults : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_bpf_privileges()) GTEST_SKIP() << kNoPrivilegesMessage;
  }

  // Records fx_no_leaks with `options` only (not the run's: this test is
  // about the defaults) and returns the JSON report.
  nlohmann::json record_and_report(const std::vector<std::string>& options, Recording* recording = nullptr) {
    std::vector<std::string> argv = {MEMTRACK_BIN, "record", "-q", "-o", dir_.file("a.zst")};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), {"--", FX_NO_LEAKS});
    RunResult run = run_process(argv, std::chrono::seconds(120));
    EXPECT_EQ(run.exit_code(), 0) << run.describe();
    EXPECT_NE(run.out.find("allocations 240000"), std::string::npos) << run.out;
    Recording rec = read_recording(dir_.file("a.zst"));
    EXPECT_TRUE(clean_read(rec));
    EXPECT_TRUE(no_losses(rec));
    if (recording) *recording = rec;
    RunResult report = run_process({MEMTRACK_BIN, "report", "--format", "json", dir_.file("a.zst")},
                                   std::chrono::seconds(120));
    EXPECT_EQ(report.exit_code(), 0) << report.describe();
    return nlohmann::json::parse(report.out, nullptr, false);
  }

  TempDir dir_;
};

bool has_feature(const Recording& rec, const std::string& feature) {
  const std::vector<std::string>& features = rec.read.header.features;
  return std::find(features.begin(), features.end(), feature) != features.end();
}

TEST_F(Defaults, CallPathsAreRecordedWithoutAsking) {
  Recording rec;
  nlohmann::json report = record_and_report({}, &rec);
  EXPECT_TRUE(has_feature(rec, "stacks-walk"));
  size_t allocations = 0, with_path = 0;
  for (const Event& e : rec.events) {
    if (!is_allocation(e.type)) continue;
    ++allocations;
    with_path += e.stack_hash != 0;
  }
  EXPECT_EQ(with_path, allocations) << "every allocation carries its call path";
  ASSERT_TRUE(report.contains("profile") && report["profile"].is_object()) << "no call paths in the report";
  bool found = false;
  for (const auto& site : report["profile"]["sites"])
    for (const auto& frame : site["frames"])
      found |= frame["label"].get<std::string>().find("allocate_at_depth") != std::string::npos;
  EXPECT_TRUE(found) << "the fixture's allocating function";
  // Its runtime's blocks (the emergency pool, stdio and iostream buffers)
  // are told from leaks by their call paths: nothing leaked.
  ASSERT_EQ(report["processes"].size(), 1u);
  EXPECT_EQ(report["processes"][0]["leaked_bytes"], 0) << report["processes"][0].dump();

  nlohmann::json without = record_and_report({"--no-stacks"}, &rec);
  EXPECT_FALSE(has_feature(rec, "stacks-walk"));
  for (const Event& e : rec.events) ASSERT_EQ(e.stack_hash, 0u) << describe(e);
  ASSERT_TRUE(without["profile"].is_object());
  for (const auto& site : without["profile"]["sites"]) {
    EXPECT_EQ(site["outcome"], "no-stack") << site.dump();
    EXPECT_TRUE(site["frames"].empty()) << site.dump();
  }
}

// The peak of a timeline series of the report's total.
uint64_t peak(const nlohmann::json& report, const char* series) {
  return report["timeline"]["total"]["peaks"][series]["bytes"].get<uint64_t>();
}

TEST_F(Defaults, MemtracksOwnMemoryIsNotTheProgramsOnEitherPath) {
  nlohmann::json fast = record_and_report({});
  nlohmann::json uprobes = record_and_report({"--uprobes"});
  ASSERT_TRUE(fast["timeline"]["total"]["has_own"].get<bool>()) << "the fast path records memtrack's own memory";
  EXPECT_FALSE(uprobes["timeline"]["total"]["has_own"].get<bool>()) << "the uprobes put none in the program";
  // memtrack's share on the fast path: its caches' mappings and the pages
  // its events and call paths took (the fixture's 240,000 events fill more
  // than a page per thread).
  EXPECT_GT(peak(fast, "memtrack_mapped"), 256 * kPage) << "the call paths' caches of its threads";
  EXPECT_GT(peak(fast, "memtrack_rss"), 16 * kPage);
  // The program's figures leave it out: both paths give the same mappings
  // but for one page (the loader's bookkeeping of one more library, its link
  // map and names, which it takes from the pages it maps for itself: on this
  // machine's paths it needed one page more, on CI's none), anonymous and
  // shared pages within a few pages (those the interposer
  // touches before the kernel can tell its work apart: its first claim of
  // shared memory). File pages may differ by the code the interposer and the
  // loader run for it (the interposer's own library, ~56 KiB, and the
  // loader's symbol lookups at its start): read-only code shared with every
  // process, counted as any library's is.
  struct Bound {
    const char* series;
    int64_t pages;
  };
  for (Bound bound : {Bound{"mapped", 1}, Bound{"rss_anon", 8}, Bound{"rss_shmem", 16}, Bound{"rss_file", 48}}) {
    auto a = static_cast<int64_t>(peak(fast, bound.series)), b = static_cast<int64_t>(peak(uprobes, bound.series));
    EXPECT_LE(std::llabs(a - b), bound.pages * static_cast<int64_t>(kPage))
        << bound.series << ": fast path " << a << ", uprobes " << b << " (memtrack's own on the fast path: rss "
        << peak(fast, "memtrack_rss") << ", mapped " << peak(fast, "memtrack_mapped") << ")";
  }
  // The text report says how much was memtrack's.
  RunResult text = run_process({MEMTRACK_BIN, "report", dir_.file("a.zst")}, std::chrono::seconds(120));
  ASSERT_EQ(text.exit_code(), 0) << text.describe();
  EXPECT_EQ(text.out.find("  memtrack    "), std::string::npos) << "the uprobe recording has no memtrack line";
  record_and_report({});
  text = run_process({MEMTRACK_BIN, "report", dir_.file("a.zst")}, std::chrono::seconds(120));
  EXPECT_NE(text.out.find("  memtrack    "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("not counted above"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace memtrack::testing
