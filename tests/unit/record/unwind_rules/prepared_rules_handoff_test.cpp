// PreparedRulesHandoff (src/record/unwind_rules/prepared_rules_handoff.h): a file's
// prepared rules go to the kernel once, when they are prepared and needed,
// whichever comes last.
#include "record/unwind_rules/prepared_rules_handoff.h"

#include <gtest/gtest.h>

namespace memtrack {
namespace {

TEST(PreparedRulesHandoff, NeededBeforePreparedGoesWhenPrepared) {
  // A walk missed in the file while it was still being prepared (the
  // recorder then gave the kernel nothing of it, and every later walk through
  // the file missed: stacks_test_uprobes with a cold rule cache).
  PreparedRulesHandoff handoff;
  EXPECT_FALSE(handoff.kernel_needs());
  EXPECT_FALSE(handoff.kernel_has());
  EXPECT_TRUE(handoff.prepared());
  EXPECT_TRUE(handoff.kernel_has());
  EXPECT_FALSE(handoff.kernel_needs()) << "once";
}

TEST(PreparedRulesHandoff, PreparedBeforeNeededGoesWhenNeeded) {
  PreparedRulesHandoff handoff;
  EXPECT_FALSE(handoff.prepared());
  EXPECT_FALSE(handoff.kernel_has());
  EXPECT_TRUE(handoff.kernel_needs());
  EXPECT_TRUE(handoff.kernel_has());
  EXPECT_FALSE(handoff.kernel_needs()) << "once";
}

TEST(PreparedRulesHandoff, NeverPreparedNeverGoes) {
  PreparedRulesHandoff handoff;
  EXPECT_FALSE(handoff.kernel_needs());
  EXPECT_FALSE(handoff.kernel_needs());
  EXPECT_FALSE(handoff.kernel_has());
}

}  // namespace
}  // namespace memtrack
