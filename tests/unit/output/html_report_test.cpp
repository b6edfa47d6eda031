// The HTML report (src/output/html_output.cpp): one self-contained page
// whose embedded data parses and holds the profile's figures, names from
// the recording kept as data, and the call trees pruned with exact totals.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <map>
#include <regex>
#include <sstream>

#include "output/html_output.h"
#include "unit/output/html_samples.h"

namespace memtrack {
namespace {

using nlohmann::json;

constexpr const char* kDataOpen = "<script type=\"application/json\" id=\"memtrack-data\">";

std::string page_of(const Report& report, const Profile& profile, CostKind by = CostKind::Bytes) {
  std::ostringstream out;
  write_html_report(report, ProfileView{&profile, by, 10, std::nullopt}, out);
  return out.str();
}

// The embedded data's text, and the page without it.
std::pair<std::string, std::string> split_data(const std::string& page) {
  size_t start = page.find(kDataOpen);
  EXPECT_NE(start, std::string::npos);
  start += std::string(kDataOpen).size();
  size_t end = page.find("</script>", start);
  return {page.substr(start, end - start), page.substr(0, start) + page.substr(end)};
}

json data_of(const std::string& page) { return json::parse(split_data(page).first); }

size_t count_of(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

// Sums of each cost (bytes, count, peak, leaked, live at end, temporary) over the sites.
std::vector<uint64_t> cost_totals(const Profile& profile) {
  std::vector<uint64_t> totals(6);
  for (const ProfileSite& site : profile.sites)
    for (size_t i = 0; i < 6; ++i) totals[i] += cost_of(site.costs, static_cast<CostKind>(i));
  return totals;
}

TEST(HtmlReport, IsSelfContained) {
  auto [data, page] = split_data(page_of(testing::sample_report(), testing::sample_profile_with_hostile_name()));
  // The data cannot open an element: no "<" at all (JSON writes it \u003c).
  EXPECT_EQ(data.find('<'), std::string::npos);
  // Two scripts, both inline: the data and the page's code.
  EXPECT_EQ(count_of(page, "<script"), 2u);
  EXPECT_EQ(count_of(page, "</script>"), 2u);
  std::regex external(R"((<link|<iframe|<img|<object|<embed|\bsrc\s*=|\bhref\s*=|url\(|@import|fetch\(|XMLHttpRequest|import\())",
                      std::regex::icase);
  EXPECT_FALSE(std::regex_search(page, external));
  // The only URL is the SVG namespace name, an identifier the browser never loads.
  std::regex url(R"(https?://[^"'\s)]*)", std::regex::icase);
  for (auto it = std::sregex_iterator(page.begin(), page.end(), url); it != std::sregex_iterator(); ++it)
    EXPECT_EQ(it->str(), "http://www.w3.org/2000/svg");
  EXPECT_NE(page.find("default-src 'none'"), std::string::npos) << "the page forbids loading anything";
}

TEST(HtmlReport, EmbeddedDataHoldsTheReportAndTreesWithEveryCost) {
  Profile profile = testing::sample_profile_with_hostile_name();
  json data = data_of(page_of(testing::sample_report(), profile, CostKind::Leaked));
  EXPECT_EQ(data["by"], "leaked");
  EXPECT_TRUE(data["has_stacks"]);
  EXPECT_EQ(data["report"]["totals"]["total_allocated"], 5626);
  EXPECT_EQ(data["report"]["totals"]["peak_memory"], 4406);
  EXPECT_EQ(data["report"]["counters"]["ring_pauses"], 3);
  EXPECT_EQ(data["report"]["profile"]["stack_outcomes"]["allocations"]["complete"], 16);
  std::vector<uint64_t> totals = cost_totals(profile);
  EXPECT_EQ(totals, (std::vector<uint64_t>{5626, 19, 4406, 4306, 0, 9}));
  EXPECT_EQ(data["costs"], (json{"bytes", "count", "peak", "leaked", "live_at_end", "temporary"}));
  for (const char* direction : {"top-down", "bottom-up"}) {
    const json& root = data["trees"][direction];
    EXPECT_EQ(data["frames"][root[0].get<size_t>()][0], "all");
    EXPECT_EQ(root[1].get<std::vector<uint64_t>>(), totals) << direction;
    // Children sum to their parent in every cost (nothing below 0.1 % here).
    uint64_t leaked = 0;
    for (const json& child : root[2]) leaked += child[1][3].get<uint64_t>();
    EXPECT_EQ(leaked, totals[3]);
  }
  // Top-down: main is the outermost frame of three sites; its children are
  // ranked by leaked bytes, the report's cost.
  const json& top_down = data["trees"]["top-down"];
  const json& main_node = top_down[2][0];
  EXPECT_EQ(data["frames"][main_node[0].get<size_t>()][0], "main");
  EXPECT_EQ(data["frames"][main_node[0].get<size_t>()][1], "/src/app/main.cpp");
  EXPECT_EQ(data["frames"][main_node[2][0][0].get<size_t>()][0], "[0xdead0000]");
  // Bottom-up: the innermost frames are the roots' children; the inline level is marked.
  bool inline_marked = false;
  for (const json& frame : data["frames"])
    if (frame[0] == "inline_helper") inline_marked = frame[4] == 1 && frame[1] == "/src/app/util.h" && frame[2] == 12;
  EXPECT_TRUE(inline_marked);
  ASSERT_EQ(data["sites"].size(), 4u);
  EXPECT_FALSE(data["report"].contains("timeline"));
}

TEST(HtmlReport, NamesFromTheRecordingAreDataNotMarkup) {
  std::string page = page_of(testing::sample_report(), testing::sample_profile_with_hostile_name());
  EXPECT_EQ(page.find("<script>window.pwned"), std::string::npos);
  EXPECT_EQ(page.find("<img"), std::string::npos);
  json data = data_of(page);
  bool found = false;
  for (const json& frame : data["frames"]) found = found || frame[0] == testing::kHostileName;
  EXPECT_TRUE(found) << "the name is kept exactly, as data";
  EXPECT_EQ(data["report"]["header"]["command"][1], testing::kHostileName);
}

TEST(HtmlReport, PrunesNodesBelowATenthOfAPercentOfEveryCostIntoOther) {
  Profile profile = testing::sample_profile();
  // 2,000 tiny call paths under main, each with its own function, far below
  // 0.1 % of every cost: they become one [other] node holding their sum.
  profile.sites[0].costs = testing::make_costs(10'000'000, 1'000'000'000, 1000, 1'000'000, 1'000'000, 10'000);
  uint32_t main_location = 1;
  for (int i = 0; i < 2000; ++i) {
    profile.locations.push_back({0x500000u + static_cast<uint64_t>(i), 0, 0x100u + static_cast<uint64_t>(i),
                                 {{"tiny_" + std::to_string(i), "/src/tiny.c", 1, 0, false}}});
    profile.sites.push_back(testing::make_site({static_cast<uint32_t>(profile.locations.size() - 1), main_location},
                                               testing::make_costs(1, 1, 0, 0, 0, 0)));
  }
  json data = data_of(page_of(testing::sample_report(), profile));
  std::vector<uint64_t> totals = cost_totals(profile);
  const json& root = data["trees"]["top-down"];
  EXPECT_EQ(root[1].get<std::vector<uint64_t>>(), totals);
  const json& main_node = root[2][0];
  ASSERT_EQ(data["frames"][main_node[0].get<size_t>()][0], "main");
  const json& other = main_node[2].back();
  EXPECT_EQ(data["frames"][other[0].get<size_t>()][0], "[other]");
  EXPECT_EQ(other[1][0], 2000u) << "their bytes summed";
  EXPECT_EQ(other[1][1], 2000u) << "their allocations summed";
  EXPECT_LT(main_node[2].size(), 10u);
  // Also merged, below 0.1 % in every cost: the [no stack] site and the
  // libfoo frame of site 1 (under make_widget top-down, a root bottom-up).
  EXPECT_EQ(data["pruned_nodes"]["top-down"], 2002u);
  EXPECT_EQ(data["pruned_nodes"]["bottom-up"], 2002u) << "each tiny function is a root of its own";
  EXPECT_EQ(data["prune_percent"], 0.1);
}

// Per written node (numbered depth first, as the page numbers them): its
// costs [bytes, allocations] and those of the window groups ending in its
// subtree, summed over every slice.
void check_groups_sum_to_nodes(const json& node, const std::map<uint64_t, std::pair<uint64_t, uint64_t>>& groups,
                               uint64_t& next_id, std::pair<uint64_t, uint64_t>* subtree_sum) {
  uint64_t id = next_id++;
  std::pair<uint64_t, uint64_t> sum{0, 0};
  if (auto it = groups.find(id); it != groups.end()) sum = it->second;
  for (const json& child : node[2]) {
    std::pair<uint64_t, uint64_t> child_sum;
    check_groups_sum_to_nodes(child, groups, next_id, &child_sum);
    sum.first += child_sum.first;
    sum.second += child_sum.second;
  }
  EXPECT_EQ(sum.first, node[1][0].get<uint64_t>()) << "bytes of node " << id;
  EXPECT_EQ(sum.second, node[1][1].get<uint64_t>()) << "allocations of node " << id;
  *subtree_sum = sum;
}

std::pair<uint64_t, uint64_t> slices_sum(const json& flat, uint64_t* max_slice = nullptr) {
  std::pair<uint64_t, uint64_t> sum{0, 0};
  for (size_t i = 0; i + 2 < flat.size(); i += 3) {
    if (max_slice) *max_slice = std::max(*max_slice, flat[i].get<uint64_t>());
    sum.first += flat[i + 2].get<uint64_t>();
    sum.second += flat[i + 1].get<uint64_t>();
  }
  return sum;
}

// The page filters its call paths by a window from each call path's
// allocations per slice of time, grouped by the tree node where the paths
// end ([other] for pruned ones): summed up the tree they must give every
// node's bytes and allocations, and each listed call path its own; past
// kHtmlWindowEntries the slices are coarsened, the sums unchanged.
TEST(HtmlReport, WindowGroupsSumToEveryTreeNode) {
  Profile profile = testing::sample_profile();
  profile.sites[0].costs = testing::make_costs(10'000'000, 1'000'000'000, 1000, 1'000'000, 1'000'000, 10'000);
  for (int i = 0; i < 2000; ++i) {
    profile.locations.push_back({0x500000u + static_cast<uint64_t>(i), 0, 0x100u + static_cast<uint64_t>(i),
                                 {{"tiny_" + std::to_string(i), "/src/tiny.c", 1, 0, false}}});
    profile.sites.push_back(testing::make_site({static_cast<uint32_t>(profile.locations.size() - 1), 1},
                                               testing::make_costs(400, 400 * 3, 0, 0, 0, 0)));
  }
  Timeline timeline;
  timeline.sites.slice_ns = 8'000'000;
  // Each site's allocations spread over slices: the tiny ones one per slice
  // (the 500 listed ones alone hold 200,000 entries, beyond the page's
  // bound), the others in two slices.
  for (size_t i = 0; i < profile.sites.size(); ++i) {
    ProfileSite& site = profile.sites[i];
    site.replay_sites = {static_cast<uint32_t>(i)};
    std::vector<SiteSlice> series;
    if (site.costs.allocations == 400) {
      for (uint32_t slice = 0; slice < 400; ++slice) series.push_back({slice, 1, 3});
    } else {
      uint64_t first = site.costs.allocations / 2;
      series.push_back({3, static_cast<uint32_t>(first), site.costs.allocated_bytes / 2});
      series.push_back({200, static_cast<uint32_t>(site.costs.allocations - first),
                        site.costs.allocated_bytes - site.costs.allocated_bytes / 2});
    }
    timeline.sites.by_site.push_back(std::move(series));
  }
  std::ostringstream out;
  ProfileView view{&profile, CostKind::Bytes, 10, std::nullopt};
  view.timeline = &timeline;
  write_html_report(testing::sample_report(), view, out);
  json data = data_of(out.str());
  const json& window = data["window"];
  ASSERT_TRUE(window.is_object());
  EXPECT_GT(window["slice_ns"].get<uint64_t>(), 8'000'000u) << "coarsened to fit kHtmlWindowEntries";
  size_t entries = 0;
  for (const char* direction : {"top-down", "bottom-up"}) {
    SCOPED_TRACE(direction);
    std::map<uint64_t, std::pair<uint64_t, uint64_t>> groups;
    uint64_t slices = window["slice_ns"].get<uint64_t>() / 8'000'000, max_slice = 0;
    for (const json& group : window[direction]) {
      groups[group[0].get<uint64_t>()] = slices_sum(group[1], &max_slice);
      entries += group[1].size() / 3;
    }
    EXPECT_LT(max_slice, 400 / slices);
    uint64_t next_id = 0;
    std::pair<uint64_t, uint64_t> sum;
    check_groups_sum_to_nodes(data["trees"][direction], groups, next_id, &sum);
  }
  ASSERT_EQ(window["sites"].size(), data["sites"].size());
  for (size_t i = 0; i < data["sites"].size(); ++i) {
    entries += window["sites"][i].size() / 3;
    auto [bytes, count] = slices_sum(window["sites"][i]);
    EXPECT_EQ(bytes, data["sites"][i]["costs"][0].get<uint64_t>());
    EXPECT_EQ(count, data["sites"][i]["costs"][1].get<uint64_t>());
  }
  EXPECT_LE(entries, kHtmlWindowEntries);
  EXPECT_TRUE(data_of(page_of(testing::sample_report(), profile))["window"].is_null()) << "no timeline, no window";
}

TEST(HtmlReport, WithoutStacksSaysSo) {
  json data = data_of(page_of(testing::sample_report(), testing::profile_without_stacks()));
  EXPECT_FALSE(data["has_stacks"]);
  EXPECT_EQ(data["report"]["totals"]["alloc_calls"], 19);
  const json& root = data["trees"]["top-down"];
  EXPECT_EQ(root[1][0], 5626);
  EXPECT_EQ(data["frames"][root[2][0][0].get<size_t>()][0], "[no stack]");
}

}  // namespace
}  // namespace memtrack
