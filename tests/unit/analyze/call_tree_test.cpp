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

// A path cut short hangs under one "[truncated]" node at the root's level,
// not as a root of its own beside main.
TEST(CallTree, TruncatedPathsHangUnderATruncatedNode) {
  Profile p = sample();
  p.sites[1].outcome = StackOutcome::TruncatedCopy;  // read <- parse <- main, cut after main
  ProfileSite cut;
  cut.locations = {2, 3};  // read <- parse, cut short
  cut.outcome = StackOutcome::NoCfi;
  cut.costs.allocated_bytes = 7;
  p.sites.push_back(cut);
  CallTreeNode top_down = build_call_tree(p, CostKind::Bytes, TreeDirection::TopDown);
  std::vector<std::string> roots;
  for (const CallTreeNode& c : top_down.children) roots.push_back(c.label);
  EXPECT_EQ(roots, (std::vector<std::string>{"main", "[truncated]", "[no stack]"}));
  const CallTreeNode& truncated = top_down.children[1];
  EXPECT_EQ(truncated.cost, 57u);
  ASSERT_EQ(truncated.children.size(), 2u);
  EXPECT_EQ(truncated.children[0].label, "main");
  EXPECT_EQ(truncated.children[1].label, "parse");
  EXPECT_EQ(truncated.children[1].children[0].label, "read");
  // Bottom-up, it is the outermost node of those paths.
  CallTreeNode bottom_up = build_call_tree(p, CostKind::Bytes, TreeDirection::BottomUp);
  for (const CallTreeNode& c : bottom_up.children) EXPECT_NE(c.label, "[truncated]");
}

// Without line information, two call sites of one function print apart in
// listings (function+offset of the return address) and merge in trees.
TEST(FrameLabels, CallSitesWithoutLinesShowTheirOffset) {
  Profile p;
  p.modules.push_back({"/lib/libx.so", "", 0x7000, 0x9000, 0, true});
  p.locations.push_back({0x7010, 0, 0x10, {{"tc_malloc", "", 0, 0, false, 0x1f}}});
  p.locations.push_back({0x7020, 0, 0x20, {{"tc_malloc", "", 0, 0, false, 0x2f}}});
  p.locations.push_back({0x7030, 0, 0x30, {{"parse", "p.c", 4, 0, false, 0x5}}});
  p.locations.push_back({0x7040, 0, 0x40, {}});
  EXPECT_EQ(frame_labels(p, p.locations[0]), (std::vector<std::string>{"tc_malloc+0x20"}));
  EXPECT_EQ(frame_labels(p, p.locations[1]), (std::vector<std::string>{"tc_malloc+0x30"}));
  EXPECT_EQ(frame_labels(p, p.locations[0], FrameNaming::Function), (std::vector<std::string>{"tc_malloc"}));
  EXPECT_EQ(frame_labels(p, p.locations[2]), (std::vector<std::string>{"parse"})) << "it has a line";
  EXPECT_EQ(frame_labels(p, p.locations[3]), (std::vector<std::string>{"[libx.so+0x40]"}));
  p.locations[0].exact = true;  // an interrupted instruction: its own offset
  EXPECT_EQ(frame_labels(p, p.locations[0]), (std::vector<std::string>{"tc_malloc+0x1f"}));
}

TEST(AllocatingFunction, WrappersAreAllocatorsAndTheStandardLibrary) {
  for (const char* wrapper :
       {"malloc", "operator new(unsigned long)", "operator new[](unsigned long, std::nothrow_t const&)", "xmalloc",
        "g_malloc0", "sqlite3Malloc", "sqlite3DbMallocRawNN", "_PyMem_RawMalloc", "PyObject_Calloc", "__strdup",
        "std::vector<int, std::allocator<int> >::_M_realloc_insert(int const&)",
        "void std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>(__gnu_cxx::__normal_iterator<int*, "
        "std::vector<int, std::allocator<int> > >, int const&)",
        "__gnu_cxx::new_allocator<char>::allocate(unsigned long, void const*)", "ns::Pool<int>::allocate<int>(int)"})
    EXPECT_TRUE(is_allocation_wrapper(wrapper)) << wrapper;
  for (const char* program :
       {"main", "parse_config(char const*)", "sqlite3BtreeInsert", "list_resize", "ns::Widget::Widget()",
        "(anonymous namespace)::Cache::grow()", "void ns::fill<std::allocator<int> >(int)", "mystd::copy()"})
    EXPECT_FALSE(is_allocation_wrapper(program)) << program;
}

// The group of a site is the frame after the outermost wrapper of its
// leading run of wrappers and unnamed frames.
TEST(AllocatingFunction, GroupsSitesPastWrappersAndUnnamedFrames) {
  Profile p;
  p.modules.push_back({"/lib/libsqlite3.so", "", 0x7000, 0x9000, 0, true});
  p.locations.push_back({0x7010, 0, 0x10, {}});                                        // 0: sqlite3MemMalloc, unnamed
  p.locations.push_back({0x7020, 0, 0x20, {{"sqlite3Malloc", "", 0, 0, false, 4}}});   // 1: a wrapper
  p.locations.push_back({0x7030, 0, 0x30, {}});                                        // 2: unnamed caller
  p.locations.push_back({0x7040, 0, 0x40, {{"sqlite3BtreeInsert", "", 0, 0, false}}});  // 3
  p.locations.push_back({0x7050, 0, 0x50, {{"main", "m.c", 3, 0, false}}});             // 4
  p.locations.push_back({0x7060, 0, 0x60, {{"std::vector<int>::push_back(int)", "", 0, 0, true},
                                           {"fill", "f.c", 9, 0, false}}});             // 5
  auto site = [](std::vector<uint32_t> locations, uint64_t bytes) {
    ProfileSite s;
    s.locations = std::move(locations);
    s.outcome = StackOutcome::Complete;
    s.costs.allocated_bytes = bytes;
    return s;
  };
  p.sites.push_back(site({0, 1, 2, 3, 4}, 100));  // -> [libsqlite3.so+0x30]
  p.sites.push_back(site({0, 1, 2, 4}, 50));      // -> [libsqlite3.so+0x30]
  p.sites.push_back(site({3, 4}, 30));            // no wrapper: the innermost frame
  p.sites.push_back(site({5, 4}, 20));            // past the inlined std:: level
  p.sites.push_back(site({}, 5));
  EXPECT_EQ(allocating_function(p, p.sites[0]), "[libsqlite3.so+0x30]");
  EXPECT_EQ(allocating_function(p, p.sites[2]), "sqlite3BtreeInsert");
  EXPECT_EQ(allocating_function(p, p.sites[3]), "fill");
  EXPECT_EQ(allocating_function(p, p.sites[4]), "[no stack]");
  std::vector<FunctionGroup> groups = group_by_allocating_function(p, CostKind::Bytes, 0);
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[0].function, "[libsqlite3.so+0x30]");
  EXPECT_EQ(groups[0].costs.allocated_bytes, 150u);
  EXPECT_EQ(groups[0].sites, (std::vector<size_t>{0, 1})) << "costliest path first";
  EXPECT_EQ(groups[1].function, "sqlite3BtreeInsert");
  EXPECT_EQ(groups[3].function, "[no stack]");
  EXPECT_EQ(group_by_allocating_function(p, CostKind::Bytes, 2).size(), 2u);
  EXPECT_TRUE(group_by_allocating_function(p, CostKind::Leaked, 0).empty());
}

}  // namespace
}  // namespace memtrack
