// The call-path sections of the text and JSON reports, on hand-made profiles.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "output/json_output.h"
#include "output/text/profile_text.h"
#include "output/utf8.h"
#include "unit/output/sample_profile.h"

namespace memtrack {
namespace {

using testing::sample_profile;

std::string text_of(const ProfileView& view, bool color = false, bool verbose = false) {
  std::ostringstream out;
  write_profile_text(view, out, color, verbose);
  return out.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

Profile deep_profile_with_long_names() {
  Profile p = sample_profile();
  std::string long_name = "ns::Outer<std::map<std::string, std::vector<std::pair<int, double>>>>::method(int, char const*)";
  p.locations.push_back({0x404040, 0, 0x4040, {{long_name, "/very/long/path/to/some/source/directory/file_name.cpp", 123456, 0, false}}});
  ProfileSite deep = testing::make_site({}, testing::make_costs(7, 1 << 30, 0, 0, 0, 0));
  for (int i = 0; i < 40; ++i) deep.locations.push_back(static_cast<uint32_t>(p.locations.size() - 1));
  p.sites.push_back(deep);
  p.totals.allocated_bytes += deep.costs.allocated_bytes;
  p.definitions_by_outcome[0] = 4;
  p.allocations_by_outcome[0] = 16;
  p.allocations_by_outcome[static_cast<int>(StackOutcome::TruncatedCopy)] = 12345678901;
  p.suppressed_leaked_bytes = 64;
  p.suppressed_leaked_allocations = 2;
  p.warnings.push_back(std::string(300, 'w'));
  return p;
}

TEST(ProfileText, FitsEightyColumnsAndCutsLongPaths) {
  Profile p = deep_profile_with_long_names();
  for (auto tree : {std::optional<TreeDirection>{}, std::optional{TreeDirection::TopDown},
                    std::optional{TreeDirection::BottomUp}}) {
    for (bool verbose : {false, true}) {
      std::string text = text_of(ProfileView{&p, CostKind::Bytes, 0, tree}, false, verbose);
      for (const std::string& line : lines_of(text)) EXPECT_LE(line.size(), 80u) << line;
      if (verbose) {
        EXPECT_NE(text.find("... 24 more frames"), std::string::npos) << "16 of the 40 frames are shown";
      }
    }
  }
}

TEST(ProfileText, RanksByTheChosenCostAndShowsOutcomesAndSuppressions) {
  Profile p = deep_profile_with_long_names();
  std::string text = text_of(ProfileView{&p, CostKind::Leaked, 2, std::nullopt}, false, true);
  EXPECT_NE(text.find("Top 2 of 3 call paths by leaked bytes"), std::string::npos) << text;
  // The 4096-byte leak ranks first, then make_widget's 200 bytes.
  EXPECT_LT(text.find("#1 4.00 KiB"), text.find("#2 200 B")) << text;
  EXPECT_NE(text.find("truncated-copy"), std::string::npos);
  EXPECT_NE(text.find("64 B leaked in 2 allocations matched a suppression"), std::string::npos) << text;
  EXPECT_NE(text.find("(inline) inline_helper"), std::string::npos);
  EXPECT_NE(text.find("util.h:12"), std::string::npos);
  EXPECT_NE(text.find("[0xdead0000]"), std::string::npos) << "an address outside every module";
}

// The default: allocating functions, each with its largest call paths
// (callers from the allocating function outwards), then the leaks.
TEST(ProfileText, GroupsByAllocatingFunctionWithTheLargestPaths) {
  Profile p = sample_profile();
  p.allocations_by_outcome[0] = 16;
  std::string text = text_of(ProfileView{&p, CostKind::Bytes, 10, std::nullopt});
  EXPECT_NE(text.find("Top 4 of 4 allocating functions by bytes allocated"), std::string::npos) << text;
  // [0xdead0000] <- main: 4 KiB; inline_helper <- make_widget <- main: 1000 B.
  EXPECT_NE(text.find("  1.   4.00 KiB  72.8% [0xdead0000]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  2.     1000 B  17.8% inline_helper\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[0xdead0000]"), std::string::npos) << text;
  EXPECT_NE(text.find("< make_widget:40 < main:7"), std::string::npos) << "callers with their lines\n" << text;
  EXPECT_NE(text.find("Leaks: 4.21 KiB in 4 blocks"), std::string::npos) << text;
  EXPECT_EQ(text.find("#1"), std::string::npos) << "the call paths in full come with --verbose\n" << text;
  EXPECT_LT(lines_of(text).size(), 25u) << text;
}

// A group's second path leaves out the callers it shares with the first,
// so that two paths never print alike because the line was cut.
TEST(ProfileText, APathsCallersSharedWithTheFirstAreLeftOut) {
  Profile p;
  p.modules.push_back({"/usr/lib/x86_64-linux-gnu/libsomething.so.1", "", 0, 0x10000, 0, true});
  for (uint64_t offset : {0x10, 0x2000, 0x3000, 0x4000, 0x5000}) p.locations.push_back({offset, 0, offset, {}});
  p.locations.push_back({0x6000, 0, 0x6000, {{"grow", "", 0, 0, false, 0x10}}});
  // grow <- four unnamed callers <- one of two different outer callers.
  p.sites.push_back(testing::make_site({5, 1, 2, 3, 0}, testing::make_costs(1, 300, 0, 0, 0, 0)));
  p.sites.push_back(testing::make_site({5, 1, 2, 3, 4}, testing::make_costs(1, 200, 0, 0, 0, 0)));
  p.totals.allocated_bytes = 500;
  p.allocations_by_outcome[0] = 2;
  std::string text = text_of(ProfileView{&p, CostKind::Bytes, 10, std::nullopt});
  EXPECT_NE(text.find("  1.      500 B 100.0% grow  (2 call paths)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("   200 B  (3 callers as above) < [libsomething.so.1+0x5000]\n"),
            std::string::npos)
      << text;
}

TEST(ProfileText, RuntimeLeaksAreCountedApart) {
  Profile p = sample_profile();
  p.allocations_by_outcome[0] = 16;
  p.runtime_leaked_allocations = 3;
  p.runtime_leaked_bytes = 72704;
  std::string text = text_of(ProfileView{&p, CostKind::Bytes, 10, std::nullopt});
  EXPECT_NE(text.find("3 blocks held by the C/C++ runtime (71.00 KiB)"), std::string::npos) << text;
  EXPECT_NE(text.find("not counted above"), std::string::npos) << text;
  EXPECT_NE(text.find("--show-runtime-leaks"), std::string::npos) << text;
}

// A filter that matched nothing says so, instead of "recorded with --no-stacks".
TEST(ProfileText, AFilterThatMatchedNothingSaysWhat) {
  Profile p;
  p.definitions_by_outcome[0] = 3;  // recorded with call paths
  ProfileView view{&p, CostKind::Bytes, 10, std::nullopt};
  view.filter_note = "no allocation of pid 999; the recording has pids 12, 13";
  std::string text = text_of(view);
  EXPECT_NE(text.find("no allocation of pid 999; the recording has pids 12, 13"), std::string::npos) << text;
  EXPECT_EQ(text.find("no-stacks"), std::string::npos) << text;
}

TEST(ProfileText, SaysWhenNoCallPathsWereRecorded) {
  Profile p;
  p.sites.push_back(testing::make_site({}, testing::make_costs(3, 30, 0, 0, 0, 0)));
  p.allocations_by_outcome[static_cast<int>(StackOutcome::NoStack)] = 3;
  std::string text = text_of(ProfileView{&p, CostKind::Bytes, 20, std::nullopt});
  EXPECT_NE(text.find("recorded with --no-stacks"), std::string::npos) << text;
  EXPECT_EQ(text.find("Top"), std::string::npos) << text;
}

TEST(ProfileText, ColorsOnlyWhenAsked) {
  Profile p = deep_profile_with_long_names();
  EXPECT_EQ(text_of(ProfileView{&p, CostKind::Bytes, 3, std::nullopt}, false).find('\x1b'), std::string::npos);
  EXPECT_NE(text_of(ProfileView{&p, CostKind::Bytes, 3, std::nullopt}, true).find("\x1b[1m"), std::string::npos);
}

TEST(ProfileJson, SitesFramesOutcomesAndTree) {
  Profile p = sample_profile();
  p.allocations_by_outcome[0] = 16;
  p.locations[3].frames[0].file = "";  // make_widget without line information
  p.locations[3].frames[0].symbol_offset = 0x2f;
  Report report;
  ProfileView view{&p, CostKind::Count, 0, TreeDirection::TopDown};
  std::ostringstream out;
  write_json_report(report, out, &view);
  nlohmann::json profile = nlohmann::json::parse(out.str())["profile"];
  EXPECT_EQ(profile["by"], "count");
  EXPECT_EQ(profile["totals"]["allocations"], 19);
  EXPECT_EQ(profile["stack_outcomes"]["allocations"]["complete"], 16);
  EXPECT_EQ(profile["stack_outcomes"]["allocations"].size(), static_cast<size_t>(kStackOutcomeCount));
  ASSERT_EQ(profile["sites"].size(), 4u);
  const nlohmann::json& first = profile["sites"][0];  // 10 allocations
  EXPECT_EQ(first["costs"]["allocations"], 10);
  ASSERT_EQ(first["frames"].size(), 3u);  // inline level + make_widget + main
  EXPECT_EQ(first["frames"][0]["function"], "inline_helper");
  EXPECT_EQ(first["frames"][0]["inlined"], true);
  EXPECT_EQ(first["frames"][0]["line"], 12);
  EXPECT_EQ(first["frames"][1]["function"], "make_widget");
  EXPECT_EQ(first["frames"][1]["address"], "0x401010");
  EXPECT_EQ(first["frames"][1]["module"], "/usr/bin/app");
  EXPECT_EQ(first["frames"][2]["function"], "main");
  EXPECT_EQ(first["allocating_function"], "inline_helper");
  EXPECT_EQ(first["frames"][1]["label"], "make_widget") << "it has a line";
  EXPECT_TRUE(first["frames"][1]["symbol_offset"].is_null());
  ASSERT_EQ(profile["allocating_functions"].size(), 4u);
  EXPECT_EQ(profile["allocating_functions"][0]["function"], "inline_helper");
  EXPECT_EQ(profile["allocating_functions"][0]["costs"]["allocations"], 10);
  EXPECT_EQ(profile["allocating_functions"][0]["call_paths"], 1);
  EXPECT_EQ(profile["runtime_leaks"]["leaked_bytes"], 0);
  EXPECT_TRUE(profile["filter_note"].is_null());
  const nlohmann::json& second = profile["sites"][1];  // [libfoo+0x2234] <- make_widget <- main
  EXPECT_EQ(second["frames"][1]["function"], "make_widget");
  EXPECT_EQ(second["frames"][1]["label"], "make_widget+0x30") << "the return address's offset";
  EXPECT_EQ(second["frames"][1]["symbol_offset"], 0x2f);
  EXPECT_EQ(second["frames"][0]["label"], "[libfoo.so.1+0x2234]");
  const nlohmann::json& tree = profile["tree"];
  EXPECT_EQ(tree["direction"], "top-down");
  EXPECT_EQ(tree["cost"], 19);
  EXPECT_EQ(tree["children"][0]["label"], "main");
  EXPECT_EQ(tree["children"][0]["cost"], 16);
  EXPECT_FALSE(nlohmann::json::parse(out.str()).contains("tree"));
  // Without a view there is no profile member at all.
  std::ostringstream plain;
  write_json_report(report, plain);
  EXPECT_FALSE(nlohmann::json::parse(plain.str()).contains("profile"));
}

// One U+FFFD per maximal invalid subpart (Unicode's practice, and the JSON
// report's); valid text unchanged.
TEST(Utf8, InvalidSubpartsBecomeOneReplacementEach) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(valid_utf8("caf\xc3\xa9 \xF0\x9F\x98\x80"), "caf\xc3\xa9 \xF0\x9F\x98\x80");
  EXPECT_EQ(valid_utf8("\xE2\x82" "A"), r + "A") << "a truncated sequence is one subpart";
  EXPECT_EQ(valid_utf8("a\xE2\x82"), "a" + r) << "truncated at the end";
  EXPECT_EQ(valid_utf8("\xff\x80"), r + r) << "bytes that start nothing";
  EXPECT_EQ(valid_utf8("\xC0\xAF"), r + r) << "overlong";
  EXPECT_EQ(valid_utf8("\xE0\x80\x80"), r + r + r) << "overlong";
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), r + r + r) << "surrogate";
  EXPECT_EQ(valid_utf8("\xF4\x90\x80\x80"), r + r + r + r) << "past U+10FFFF";
  EXPECT_EQ(valid_utf8("\xF0\x9F\x98"), r) << "a truncated 4-byte sequence";
}

}  // namespace
}  // namespace memtrack
