#include <gtest/gtest.h>

#include "analyze/suppressions.h"

namespace memtrack {
namespace {

TEST(Suppressions, PatternsFollowLeakSanitizer) {
  EXPECT_TRUE(suppression_pattern_matches("make_cache", "Cache::make_cache(int)"));
  EXPECT_TRUE(suppression_pattern_matches("Cache::*(int)", "Cache::make_cache(int)"));
  EXPECT_TRUE(suppression_pattern_matches("^Cache::", "Cache::make_cache(int)"));
  EXPECT_FALSE(suppression_pattern_matches("^make", "Cache::make_cache(int)"));
  EXPECT_TRUE(suppression_pattern_matches("(int)$", "Cache::make_cache(int)"));
  EXPECT_FALSE(suppression_pattern_matches("Cache$", "Cache::make_cache(int)"));
  EXPECT_TRUE(suppression_pattern_matches("^libfoo.so$", "libfoo.so"));
  EXPECT_FALSE(suppression_pattern_matches("^libfoo.so$", "libfoo.so.1"));
  EXPECT_TRUE(suppression_pattern_matches("a*b*c", "xxaxxbxxcxx"));
  EXPECT_FALSE(suppression_pattern_matches("a*c*b", "abc"));
  EXPECT_FALSE(suppression_pattern_matches("", "anything"));
  EXPECT_FALSE(suppression_pattern_matches("$", "anything")) << "only anchors: nothing";
  EXPECT_FALSE(suppression_pattern_matches("^$", ""));
  EXPECT_FALSE(suppression_pattern_matches("*", "")) << "an empty name (no source file) never matches";
}

TEST(Suppressions, ParsesLeakLinesAndRefusesOtherKinds) {
  Suppressions s = Suppressions::from_text("# comment\n\n  leak:site_a \nleak:^libz*\n", "supp.txt");
  Profile profile;
  profile.modules.push_back({"/usr/lib/libzstd.so.1", "", 0, 0, 0, true});
  profile.locations.push_back({0x10, -1, 0, {{"site_a", "a.c", 3, 0, false}}});
  profile.locations.push_back({0x20, 0, 0x20, {}});
  profile.locations.push_back({0x30, -1, 0, {{"other", "b.c", 3, 0, false}}});
  ProfileSite a{{0}, StackOutcome::Complete, false, {}};
  ProfileSite z{{1, 2}, StackOutcome::Complete, false, {}};
  ProfileSite other{{2}, StackOutcome::Complete, false, {}};
  EXPECT_TRUE(s.matches(profile, a));
  EXPECT_FALSE(s.matches(profile, z)) << "^libz* is anchored at the path's start";
  EXPECT_FALSE(s.matches(profile, other));
  EXPECT_TRUE(Suppressions::from_text("leak:libzstd\n", "x").matches(profile, z));
  try {
    Suppressions::from_text("leak:ok\nrace:foo\n", "supp.txt");
    FAIL() << "a race: entry must be refused";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("supp.txt:2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Suppressions::from_text("leak:\n", "x"), std::runtime_error);
  EXPECT_THROW(Suppressions::from_file("/nonexistent/supp.txt"), std::runtime_error);
}

}  // namespace
}  // namespace memtrack
