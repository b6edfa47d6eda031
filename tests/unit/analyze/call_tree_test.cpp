#include <gtest/gtest.h>

#include "analyze/call_tree.h"

namespace memtrack {
namespace {

// main -> parse -> (inline) grow -> malloc: 100 bytes
// main -> parse -> read: 50 bytes;  main -> load: 30 bytes; no stack: 5 bytes
Profile sample() {
  Profile p;
  p.modules.push_back({"/bin/app", "ab", 0x1000, 0x2000, 0, true});
  p.locations.push_back({0x1010, 0, 0x10, {{"grow", "v.h", 5, 0, true}, {"parse", "p.c", 10, 0, false}}});
  p.locations.push_back({0x1100, 0, 0x100, {{"main", "m.c", 3, 0, false}}});
  p.locations.push_back({0x1020, 0, 0x20, {{"read", "p.c", 20, 0, false}}});
  p.locations.push_back({0x1030, 0, 0x30, {{"parse", "p.c", 11, 0, false}}});
  p.locations.push_back({0x1040, 0, 0x40, {}});
  auto site = [](std::vector<uint32_t> locations, uint64_t bytes) {
    ProfileSite s;
    s.locations = std::move(locations);
    s.outcome = StackOutcome::Complete;
    s.costs.allocated_bytes = bytes;
    s.costs.allocations = 1;
    return s;
  };
  p.sites.push_back(site({0, 1}, 100));
  p.sites.push_back(site({2, 3, 1}, 50));
  p.sites.push_back(site({4, 1}, 30));
  ProfileSite none = site({}, 5);
  none.outcome = StackOutcome::NoStack;
  p.sites.push_back(none);
  return p;
}

TEST(CallTree, TopDownMergesCallersByFunction) {
  Profile p = sample();
  CallTreeNode root = build_call_tree(p, CostKind::Bytes, TreeDirection::TopDown);
  EXPECT_EQ(root.cost, 185u);
  ASSERT_EQ(root.children.size(), 2u);
  const CallTreeNode& main = root.children[0];
  EXPECT_EQ(main.label, "main");
  EXPECT_EQ(main.cost, 180u);
  ASSERT_EQ(main.children.size(), 2u);
  EXPECT_EQ(main.children[0].label, "parse");  // two sites through parse merge
  EXPECT_EQ(main.children[0].cost, 150u);
  EXPECT_EQ(main.children[0].children[0].label, "grow");
  EXPECT_EQ(main.children[0].children[1].label, "read");
  EXPECT_EQ(main.children[1].label, "[app+0x40]");
  EXPECT_EQ(root.children[1].label, "[no stack]");
}

TEST(CallTree, BottomUpStartsAtTheAllocatingFunction) {
  Profile p = sample();
  CallTreeNode root = build_call_tree(p, CostKind::Count, TreeDirection::BottomUp);
  EXPECT_EQ(root.cost, 4u);
  ASSERT_EQ(root.children.size(), 4u);
  EXPECT_EQ(root.children[0].label, "[app+0x40]");  // ties by label
  EXPECT_EQ(root.children[1].label, "[no stack]");
  EXPECT_EQ(root.children[2].label, "grow");
  EXPECT_EQ(root.children[2].children[0].label, "parse");
  EXPECT_EQ(root.children[2].children[0].children[0].label, "main");
}

TEST(CallTree, RankedSitesDropZeroCostsAndKeepTopN) {
  Profile p = sample();
  EXPECT_EQ(ranked_sites(p, CostKind::Bytes, 0), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(ranked_sites(p, CostKind::Bytes, 2), (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(ranked_sites(p, CostKind::Leaked, 0).empty());
}

}  // namespace
}  // namespace memtrack
