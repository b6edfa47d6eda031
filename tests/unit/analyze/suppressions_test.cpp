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
  ProfileSite a{.locations = {0}, .outcome = StackOutcome::Complete};
  ProfileSite z{.locations = {1, 2}, .outcome = StackOutcome::Complete};
  ProfileSite other{.locations = {2}, .outcome = StackOutcome::Complete};
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


// Call paths as recorded on Debian 12 (g++, ls, date, getent; see
// docs/REPORT.md "Runtime allocations").
class RuntimeAllocations : public ::testing::Test {
 protected:
  uint32_t location(int32_t module, std::vector<std::string> functions) {
    ProfileLocation l{0x1000 + profile_.locations.size(), module, 0x100 + profile_.locations.size(), {}};
    for (std::string& f : functions) l.frames.push_back({std::move(f), "", 0, 0, false});
    for (size_t i = 0; i + 1 < l.frames.size(); ++i) l.frames[i].inlined = true;
    profile_.locations.push_back(l);
    return static_cast<uint32_t>(profile_.locations.size() - 1);
  }
  bool runtime(std::vector<uint32_t> locations) {
    return is_runtime_allocation(profile_, ProfileSite{.locations = std::move(locations), .outcome = StackOutcome::Complete});
  }
  void SetUp() override {
    for (const char* path : {"/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30", "/usr/lib64/ld-linux-x86-64.so.2",
                             "/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/bin/app", "/usr/lib/libplugin.so"})
      profile_.modules.push_back({path, "", 0, 0, 0, true});
  }
  enum { kLibstdcxx, kLoader, kLibc, kApp, kPlugin };
  Profile profile_;
};

TEST_F(RuntimeAllocations, TheLibraryListMatchesWhatTheRuntimeKeeps) {
  uint32_t main = location(kApp, {"main"});
  uint32_t start = location(kLibc, {"__libc_start_call_main"});
  EXPECT_TRUE(runtime({location(kLibc, {"__GI__IO_file_doallocate"}), location(kLibc, {"__GI__IO_doallocbuf"}),
                       location(kLibc, {"_IO_new_file_overflow"}), main, start}))
      << "stdout's buffer";
  EXPECT_TRUE(runtime({location(kLibc, {"_nl_intern_locale_data"}), location(kLibc, {"_nl_load_locale"}),
                       location(kLibc, {"_nl_find_locale"}), location(kLibc, {"__GI_setlocale"}), main}))
      << "locale data";
  EXPECT_TRUE(runtime({location(kLibc, {"__nss_module_allocate"}), location(kLibc, {"nss_action_parse"}),
                       location(kLibc, {"nss_database_reload"}), main}));
  EXPECT_TRUE(runtime({location(kLibc, {"__tzfile_read"}), location(kLibc, {"tzset_internal"}), main}));
  EXPECT_TRUE(runtime({location(kLibc, {"getpwuid"}), main}));
  EXPECT_FALSE(runtime({location(kApp, {"my_getpwuid_cache"}), main})) << "^getpwuid$ is anchored";
  EXPECT_FALSE(runtime({location(kApp, {"make_widget"}), main, start}));
  EXPECT_FALSE(runtime({location(kLibc, {"__GI___libc_strdup"}), main})) << "a strdup the program owns";
}

// libstdc++'s emergency exception pool, from its own static constructor
// (unnamed without debug information): the path stays in the runtime's
// files up to the loader's call_init.
TEST_F(RuntimeAllocations, ARuntimeLibrarysStaticConstructor) {
  uint32_t pool = location(kLibstdcxx, {});
  uint32_t init = location(kLoader, {"call_init", "call_init"});
  uint32_t dl_init = location(kLoader, {"_dl_init"});
  EXPECT_TRUE(runtime({pool, init, dl_init}));
  EXPECT_TRUE(runtime({location(kLibstdcxx, {"(anonymous namespace)::pool::pool()"}), location(kApp, {"main"})}))
      << "named with debug information";
  // The program's or a plugin's own static constructors are the program's.
  EXPECT_FALSE(runtime({location(kPlugin, {}), init, dl_init}));
  EXPECT_FALSE(runtime({location(kApp, {"_GLOBAL__sub_I_main"}), location(kLibc, {"call_init"})}));
  EXPECT_FALSE(runtime({init, dl_init})) << "no runtime frame before the loader";
}

}  // namespace
}  // namespace memtrack
