// Folded stacks (write_folded) of hand-made profiles, compared as exact text,
// and the CostKind helpers.
#include "output/folded_output.h"

#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>
#include <string>

#include "analyze/cost_kind.h"
#include "unit/output/sample_profile.h"

namespace memtrack {
namespace {

using testing::make_costs;
using testing::make_site;
using testing::sample_profile;

std::string folded(const Profile& profile, CostKind kind) {
  std::ostringstream out;
  write_folded(profile, kind, out);
  return out.str();
}

TEST(FoldedOutput, EachCostKindOfTheSampleProfile) {
  Profile p = sample_profile();
  // Outermost first; inline levels are frames; unknown frames by module and
  // offset, or by address outside every module; sorted by text.
  EXPECT_EQ(folded(p, CostKind::Bytes),
            "[no stack] 30\n"
            "main;[0xdead0000] 4096\n"
            "main;make_widget;[libfoo.so.1+0x2234] 500\n"
            "main;make_widget;inline_helper 1000\n");
  EXPECT_EQ(folded(p, CostKind::Count),
            "[no stack] 3\n"
            "main;[0xdead0000] 1\n"
            "main;make_widget;[libfoo.so.1+0x2234] 5\n"
            "main;make_widget;inline_helper 10\n");
  // Sites costing nothing of the kind are left out.
  EXPECT_EQ(folded(p, CostKind::Peak),
            "[no stack] 10\n"
            "main;[0xdead0000] 4096\n"
            "main;make_widget;inline_helper 300\n");
  EXPECT_EQ(folded(p, CostKind::Leaked),
            "[no stack] 10\n"
            "main;[0xdead0000] 4096\n"
            "main;make_widget;inline_helper 200\n");
  EXPECT_EQ(folded(p, CostKind::Temporary),
            "main;make_widget;[libfoo.so.1+0x2234] 5\n"
            "main;make_widget;inline_helper 4\n");
}

TEST(FoldedOutput, SitesWithTheSameTextAreSummed) {
  Profile p;
  // Two addresses of the same functions: two sites, one folded stack.
  p.locations.push_back({0x1000, -1, 0, {{"leaf", "", 0, 0, false}}});
  p.locations.push_back({0x2000, -1, 0, {{"root", "", 0, 0, false}}});
  p.locations.push_back({0x1004, -1, 0, {{"leaf", "", 0, 0, false}}});
  p.locations.push_back({0x2008, -1, 0, {{"root", "", 0, 0, false}}});
  p.sites.push_back(make_site({0, 1}, make_costs(1, 16, 0, 0, 0, 0)));
  p.sites.push_back(make_site({2, 3}, make_costs(2, 48, 0, 0, 0, 0)));
  p.sites.push_back(make_site({}, make_costs(1, 8, 0, 0, 0, 0)));
  p.sites.push_back(make_site({}, make_costs(1, 4, 0, 0, 0, 0)));
  EXPECT_EQ(folded(p, CostKind::Bytes), "[no stack] 12\nroot;leaf 64\n");
  EXPECT_EQ(folded(p, CostKind::Count), "[no stack] 2\nroot;leaf 3\n");
}

TEST(FoldedOutput, NamesCannotBreakTheFormat) {
  Profile p;
  p.modules.push_back({"/opt/we;ird/lib;x.so", "", 0x1000, 0x2000, 0, false});
  p.locations.push_back({0x1000, -1, 0, {{"f<a;b>", "", 0, 0, true}, {"operator new(unsigned long)", "", 0, 0, false}}});
  p.locations.push_back({0x2000, -1, 0, {{"two\nlines\r", "", 0, 0, false}}});
  p.locations.push_back({0x1010, 0, 0x10, {}});
  p.sites.push_back(make_site({0, 1, 2}, make_costs(1, 7, 0, 0, 0, 0)));
  // The module basename is sanitized too.
  EXPECT_EQ(folded(p, CostKind::Bytes), "[lib:x.so+0x10];two lines ;operator new(unsigned long);f<a:b> 7\n");
}

TEST(FoldedOutput, InvalidUtf8IsReplaced) {
  Profile p;
  p.locations.push_back({0x1000, -1, 0, {{"bad\xff\xc3(name", "", 0, 0, false}, {"caf\xc3\xa9", "", 0, 0, false}}});
  p.sites.push_back(make_site({0}, make_costs(1, 3, 0, 0, 0, 0)));
  EXPECT_EQ(folded(p, CostKind::Bytes), "caf\xc3\xa9;bad\xEF\xBF\xBD\xEF\xBF\xBD(name 3\n") << "valid UTF-8 is kept";
}

TEST(FoldedOutput, AFrameWithoutAFunctionIsShownByAddress) {
  Profile p;
  p.modules.push_back({"libm.so.6", "", 0x5000, 0x6000, 0, true});
  p.locations.push_back({0x5040, 0, 0x40, {{"", "/src/x.c", 3, 0, false}}});
  p.sites.push_back(make_site({0}, make_costs(1, 1, 0, 0, 0, 0)));
  EXPECT_EQ(folded(p, CostKind::Count), "[libm.so.6+0x40] 1\n");
}

// A path cut short starts at "[truncated]" instead of being a root of its
// own beside main.
TEST(FoldedOutput, TruncatedPathsStartAtATruncatedFrame) {
  Profile p = sample_profile();
  p.sites[1].outcome = StackOutcome::TruncatedCopy;
  p.sites[3].outcome = StackOutcome::NoCfi;
  EXPECT_EQ(folded(p, CostKind::Bytes),
            "[no stack] 30\n"
            "[truncated];main;[0xdead0000] 4096\n"
            "[truncated];main;make_widget;[libfoo.so.1+0x2234] 500\n"
            "main;make_widget;inline_helper 1000\n");
}

TEST(FoldedOutput, NothingToShowGivesNoLines) {
  Profile p = sample_profile();
  for (ProfileSite& site : p.sites) site.costs.temporary_allocations = 0;
  EXPECT_EQ(folded(p, CostKind::Temporary), "");
  EXPECT_EQ(folded(Profile{}, CostKind::Bytes), "");
}

TEST(FoldedOutput, ABadLocationIndexIsAnError) {
  Profile p = sample_profile();
  p.sites[0].locations.push_back(99);
  EXPECT_THROW(folded(p, CostKind::Bytes), std::runtime_error);
}

TEST(CostKind, NamesRoundTripAndPickTheirCost) {
  SiteCosts c;
  c.allocations = 1;
  c.allocated_bytes = 2;
  c.peak_bytes = 3;
  c.leaked_bytes = 4;
  c.temporary_allocations = 5;
  c.peak_allocations = 100;  // figures no kind selects
  c.leaked_allocations = 100;
  c.temporary_bytes = 100;
  struct Expected {
    const char* name;
    CostKind kind;
    uint64_t cost;
  };
  for (const Expected& e : {Expected{"bytes", CostKind::Bytes, 2}, {"count", CostKind::Count, 1},
                            {"peak", CostKind::Peak, 3}, {"leaked", CostKind::Leaked, 4},
                            {"temporary", CostKind::Temporary, 5}}) {
    SCOPED_TRACE(e.name);
    EXPECT_STREQ(cost_kind_name(e.kind), e.name);
    CostKind parsed = e.kind == CostKind::Bytes ? CostKind::Count : CostKind::Bytes;
    ASSERT_TRUE(cost_kind_from_name(e.name, &parsed));
    EXPECT_EQ(parsed, e.kind);
    EXPECT_EQ(cost_of(c, e.kind), e.cost);
  }
}

TEST(CostKind, UnknownNamesAreRejected) {
  for (const char* name : {"", "Bytes", "byte", "bytes ", "allocations", "leaks"}) {
    CostKind kind = CostKind::Peak;
    EXPECT_FALSE(cost_kind_from_name(name, &kind)) << '"' << name << '"';
    EXPECT_EQ(kind, CostKind::Peak) << "left untouched";
  }
}

}  // namespace
}  // namespace memtrack
