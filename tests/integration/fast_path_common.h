// What fast_path_test and fast_path_stacks_test share: the test fixture, the
// trailer's counters, and a command recorded on both paths (--uprobes, then
// the default fast path), each artifact read into a view of its report.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "recording.h"

namespace memtrack::testing {

class FastPathTest : public ::testing::Test {
 protected:
  void SetUp() override { MEMTRACK_REQUIRE_BPF_PRIVILEGES(); }
  TempDir dir_;
};

inline uint64_t counter(const Recording& rec, const std::string& name) {
  if (!rec.read.trailer) return 0;
  auto it = rec.read.trailer->counters.find(name);
  return it == rec.read.trailer->counters.end() ? 0 : it->second;
}

template <typename View>
struct BothPaths {
  Recorded uprobes, fast;
  View uprobe_view, fast_view;
};

// `read_view(artifact)` gives a View; `options` go to both recordings.
template <typename ReadView>
auto record_both_paths(const TempDir& dir, const std::vector<std::string>& command,
                       const std::vector<std::string>& options, ReadView read_view,
                       std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  BothPaths<decltype(read_view(std::string()))> b;
  std::vector<std::string> uprobe_options = {"--uprobes"};
  uprobe_options.insert(uprobe_options.end(), options.begin(), options.end());
  b.uprobes = record_command(dir, command, timeout, {}, uprobe_options);
  EXPECT_EQ(b.uprobes.run.exit_code(), 0) << b.uprobes.run.err;
  b.uprobe_view = read_view(dir.file("a.zst"));
  b.fast = record_command(dir, command, timeout, {}, options);
  EXPECT_EQ(b.fast.run.exit_code(), 0) << b.fast.run.err;
  b.fast_view = read_view(dir.file("a.zst"));
  return b;
}

}  // namespace memtrack::testing
