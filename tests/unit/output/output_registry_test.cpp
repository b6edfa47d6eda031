// The output seam (src/output/output.h): the registry every caller reads,
// the docs that list it, and the one frame labelling every output shares.
#include "output/output.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "analyze/call_tree.h"
#include "output/profile.pb.h"
#include "unit/output/sample_profile.h"

namespace memtrack {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string gunzip(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buffer[65536];
  int rc;
  do {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buffer, sizeof buffer - z.avail_out);
  } while (rc == Z_OK);
  inflateEnd(&z);
  EXPECT_EQ(rc, Z_STREAM_END);
  return out;
}

std::string write(const OutputFormat& format, const Report& report, const Profile& profile,
                  const OutputOptions& options = {}) {
  std::ostringstream sink;
  format.write(ReportModel{report, profile}, options, sink);
  return sink.str();
}

TEST(OutputRegistry, EveryOutputIsComplete) {
  ASSERT_FALSE(output_formats().empty());
  EXPECT_EQ(output_formats().front()->name, "text") << "the default comes first";
  std::set<std::string_view> names;
  for (const OutputFormat* format : output_formats()) {
    EXPECT_TRUE(names.insert(format->name).second) << "two outputs named " << format->name;
    EXPECT_FALSE(format->summary.empty()) << format->name;
    EXPECT_FALSE(format->noun.empty()) << format->name;
    EXPECT_NE(format->write, nullptr) << format->name;
    EXPECT_EQ(find_output_format(format->name), format);
  }
  EXPECT_EQ(find_output_format("xml"), nullptr);
}

// The docs' usage lines list exactly the registry's formats.
TEST(OutputRegistry, TheDocsListEveryFormat) {
  const std::string usage = "--format " + output_format_names("|") + "]";
  for (const char* doc : {"README.md", "docs/REPORT.md"})
    EXPECT_NE(read_file(std::string(MEMTRACK_SOURCE_DIR) + "/" + doc).find(usage), std::string::npos)
        << doc << " does not say " << usage;
}

TEST(OutputRegistry, EveryOutputWritesTheSampleAndBinaryOnesSaySo) {
  Report report;
  Profile profile = testing::sample_profile();
  for (const OutputFormat* format : output_formats()) {
    std::string bytes = write(*format, report, profile);
    ASSERT_FALSE(bytes.empty()) << format->name;
    bool gzip = bytes.size() > 2 && bytes[0] == '\x1f' && bytes[1] == '\x8b';
    EXPECT_EQ(format->binary, gzip) << format->name;
  }
}

// A site whose Stack record is missing is named alike by every output that
// names frames: the call tree, the allocating-function groups, folded stacks
// pprof, speedscope and heaptrack (these said "[no stack]" before).
TEST(OutputRegistry, EveryOutputNamesAStacklessSiteAlike) {
  Profile profile = testing::sample_profile();
  profile.sites[2].outcome = StackOutcome::Undefined;  // the site without locations
  EXPECT_EQ(site_labels(profile, profile.sites[2], FrameNaming::Function),
            std::vector<std::string>{"[stack record missing]"});
  EXPECT_EQ(allocating_function(profile, profile.sites[2]), "[stack record missing]");
  CallTreeNode tree = build_call_tree(profile, CostKind::Count, TreeDirection::TopDown);
  bool in_tree = false;
  for (const CallTreeNode& node : tree.children) in_tree |= node.label == "[stack record missing]";
  EXPECT_TRUE(in_tree);

  Report report;
  OutputOptions by_count;
  by_count.by = CostKind::Count;
  std::string folded = write(*find_output_format("folded"), report, profile, by_count);
  EXPECT_NE(folded.find("[stack record missing] 3\n"), std::string::npos) << folded;
  EXPECT_EQ(folded.find("[no stack]"), std::string::npos) << folded;

  perftools::profiles::Profile pprof;
  ASSERT_TRUE(pprof.ParseFromString(gunzip(write(*find_output_format("pprof"), report, profile))));
  std::set<std::string> strings(pprof.string_table().begin(), pprof.string_table().end());
  EXPECT_TRUE(strings.count("[stack record missing]"));
  EXPECT_FALSE(strings.count("[no stack]"));

  std::string speedscope = write(*find_output_format("speedscope"), report, profile);
  EXPECT_NE(speedscope.find("\"[stack record missing]\""), std::string::npos) << speedscope;
  EXPECT_EQ(speedscope.find("[no stack]"), std::string::npos) << speedscope;

  std::string heaptrack = gunzip(write(*find_output_format("heaptrack"), report, profile));
  EXPECT_NE(heaptrack.find(" [stack record missing]\n"), std::string::npos) << heaptrack;
  EXPECT_EQ(heaptrack.find("[no stack]"), std::string::npos) << heaptrack;
}

}  // namespace
}  // namespace memtrack
