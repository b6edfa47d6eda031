// pprof output (write_pprof) of a hand-made profile: decoded back with the
// generated protobuf classes and checked field by field, then read by
// `go tool pprof` (-raw, -traces, -top), the reference reader.
#include "output/pprof_output.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "output/profile.pb.h"
#include "support/test_support.h"
#include "unit/output/sample_profile.h"

namespace memtrack {
namespace {

namespace pb = perftools::profiles;
using testing::make_costs;
using testing::make_site;
using testing::sample_profile;

std::string write(const Profile& profile) {
  std::ostringstream out;
  write_pprof(profile, out);
  return out.str();
}

std::string gunzip(const std::string& data) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw std::runtime_error("inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buffer[4096];
  int rc;
  do {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof(buffer);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - z.avail_out);
  } while (rc == Z_OK);
  inflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("not a complete gzip stream: inflate returned " + std::to_string(rc));
  return out;
}

pb::Profile decode(const std::string& file) {
  // The gzip magic: pprof expects the file gzipped, not raw deflate or zlib.
  EXPECT_GE(file.size(), 2u);
  EXPECT_EQ(file.substr(0, 2), "\x1f\x8b");
  pb::Profile p;
  if (!p.ParseFromString(gunzip(file))) throw std::runtime_error("not a perftools.profiles.Profile");
  return p;
}

// A string table entry, bounds-checked.
std::string str(const pb::Profile& p, int64_t index) {
  if (index < 0 || index >= p.string_table_size()) {
    ADD_FAILURE() << "string index " << index << " outside the table of " << p.string_table_size();
    return "<bad index>";
  }
  return p.string_table(static_cast<int>(index));
}

const pb::Function* function(const pb::Profile& p, uint64_t id) {
  for (const pb::Function& f : p.function())
    if (f.id() == id) return &f;
  return nullptr;
}

// "name@line:column" for each line of a location, in the order written.
std::vector<std::string> lines_of(const pb::Profile& p, const pb::Location& l) {
  std::vector<std::string> out;
  for (const pb::Line& line : l.line()) {
    const pb::Function* f = function(p, line.function_id());
    out.push_back((f ? str(p, f->name()) : "<no function " + std::to_string(line.function_id()) + ">") + "@" +
                  std::to_string(line.line()) + ":" + std::to_string(line.column()));
  }
  return out;
}

// With --at (a snapshot's profile), what was live then is what pprof shows
// first: peak_space, the sites' bytes live at that moment.
TEST(PprofOutput, WhatWasLiveAtTheMomentIsTheDefaultSampleType) {
  Profile profile = sample_profile();
  profile.live_at_ns = 1'500'000'000;
  pb::Profile p = decode(write(profile));
  EXPECT_EQ(str(p, p.default_sample_type()), "peak_space");
  bool names_the_moment = false;
  for (int64_t comment : p.comment()) names_the_moment |= str(p, comment).find("live at 1.5 s") != std::string::npos;
  EXPECT_TRUE(names_the_moment);
}

TEST(PprofOutput, DecodesToTheExpectedProfile) {
  Profile profile = sample_profile();
  pb::Profile p = decode(write(profile));

  // Strings: 0 is "", none twice.
  ASSERT_GT(p.string_table_size(), 0);
  EXPECT_EQ(p.string_table(0), "");
  std::set<std::string> distinct(p.string_table().begin(), p.string_table().end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(p.string_table_size())) << "string table has duplicates";

  ASSERT_EQ(p.sample_type_size(), 6);
  const std::array<std::pair<const char*, const char*>, 6> types{
      {{"alloc_objects", "count"}, {"alloc_space", "bytes"}, {"inuse_objects", "count"}, {"inuse_space", "bytes"},
       {"peak_objects", "count"}, {"peak_space", "bytes"}}};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(str(p, p.sample_type(i).type()), types[i].first);
    EXPECT_EQ(str(p, p.sample_type(i).unit()), types[i].second);
  }
  EXPECT_EQ(str(p, p.default_sample_type()), "inuse_space");
  EXPECT_EQ(p.time_nanos(), 0) << "unknown start";
  EXPECT_EQ(p.comment_size(), 0);

  ASSERT_EQ(p.mapping_size(), 2);
  const pb::Mapping& app = p.mapping(0);
  EXPECT_EQ(app.id(), 1u);
  EXPECT_EQ(app.memory_start(), 0x400000u);
  EXPECT_EQ(app.memory_limit(), 0x480000u);
  EXPECT_EQ(app.file_offset(), 0u);
  EXPECT_EQ(str(p, app.filename()), "/usr/bin/app");
  EXPECT_EQ(str(p, app.build_id()), "abcdef0123456789");
  EXPECT_TRUE(app.has_functions() && app.has_filenames() && app.has_line_numbers() && app.has_inline_frames());
  const pb::Mapping& lib = p.mapping(1);
  EXPECT_EQ(lib.id(), 2u);
  // Mappings cover their file from offset 0 in the first placement.
  EXPECT_EQ(lib.memory_start(), 0x7f0000000000u - 0x1000);
  EXPECT_EQ(lib.memory_limit(), 0x7f0000010000u);
  EXPECT_EQ(lib.file_offset(), 0u);
  EXPECT_EQ(str(p, lib.filename()), "/usr/lib/x86_64-linux-gnu/libfoo.so.1");
  EXPECT_EQ(lib.build_id(), 0) << "no build id: the empty string";
  EXPECT_FALSE(lib.has_functions() || lib.has_filenames() || lib.has_line_numbers() || lib.has_inline_frames());

  // Functions: one per (name, file); make_widget is at two addresses.
  std::vector<std::string> functions;
  std::set<uint64_t> function_ids;
  for (const pb::Function& f : p.function()) {
    EXPECT_NE(f.id(), 0u);
    function_ids.insert(f.id());
    EXPECT_EQ(f.system_name(), f.name());
    functions.push_back(str(p, f.name()) + " in " + str(p, f.filename()));
  }
  std::sort(functions.begin(), functions.end());
  EXPECT_EQ(functions, (std::vector<std::string>{"[0xdead0000] in ", "[libfoo.so.1+0x2234] in ", "[no stack] in ",
                                                 "inline_helper in /src/app/util.h", "main in /src/app/main.cpp",
                                                 "make_widget in /src/app/widget.cpp"}));
  EXPECT_EQ(function_ids.size(), functions.size()) << "function ids are not unique";

  // Locations: ours (ids = index + 1) and the one for the site without a stack.
  ASSERT_EQ(p.location_size(), 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(p.location(i).id(), static_cast<uint64_t>(i + 1));
  EXPECT_EQ(p.location(0).address(), 0x40100fu) << "a return address, given inside its call";
  EXPECT_EQ(p.location(0).mapping_id(), 1u);
  EXPECT_EQ(lines_of(p, p.location(0)), (std::vector<std::string>{"inline_helper@12:5", "make_widget@40:3"}))
      << "innermost inline level first, the containing function last";
  EXPECT_EQ(lines_of(p, p.location(1)), (std::vector<std::string>{"main@7:0"}));
  EXPECT_EQ(p.location(2).address(), 0x7f0000000000u - 0x1000 + 0x2234 - 1)
      << "memory_start + its file offset, inside the call before the return address";
  EXPECT_EQ(p.location(2).mapping_id(), 2u);
  EXPECT_EQ(lines_of(p, p.location(2)), (std::vector<std::string>{"[libfoo.so.1+0x2234]@0:0"}))
      << "nothing known: named by its file offset, so that pprof keeps addresses apart";
  EXPECT_EQ(lines_of(p, p.location(3)), (std::vector<std::string>{"make_widget@55:0"}));
  EXPECT_EQ(p.location(0).line(1).function_id(), p.location(3).line(0).function_id());
  EXPECT_EQ(p.location(4).address(), 0xdead0000u);
  EXPECT_EQ(p.location(4).mapping_id(), 0u) << "outside every module";
  EXPECT_EQ(lines_of(p, p.location(4)), (std::vector<std::string>{"[0xdead0000]@0:0"}));
  EXPECT_EQ(p.location(5).mapping_id(), 0u);
  EXPECT_EQ(lines_of(p, p.location(5)), (std::vector<std::string>{"[no stack]@0:0"}));

  // Samples: one per site, leaf first, values in the sample types' order.
  ASSERT_EQ(p.sample_size(), 4);
  const std::vector<std::vector<uint64_t>> ids{{1, 2}, {3, 4, 2}, {6}, {5, 2}};
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE("sample " + std::to_string(i));
    const SiteCosts& c = profile.sites[i].costs;
    EXPECT_EQ(std::vector<uint64_t>(p.sample(i).location_id().begin(), p.sample(i).location_id().end()), ids[i]);
    EXPECT_EQ(std::vector<int64_t>(p.sample(i).value().begin(), p.sample(i).value().end()),
              (std::vector<int64_t>{static_cast<int64_t>(c.allocations), static_cast<int64_t>(c.allocated_bytes),
                                    static_cast<int64_t>(c.leaked_allocations), static_cast<int64_t>(c.leaked_bytes),
                                    static_cast<int64_t>(c.peak_allocations), static_cast<int64_t>(c.peak_bytes)}));
    EXPECT_EQ(p.sample(i).label_size(), 0) << "a site of every thread has no label";
  }
}

// A site of one thread (ProfileOptions::split_by_thread) carries string
// labels pid, thread and command (when known).
TEST(PprofOutput, ThreadSitesAreLabelled) {
  Profile profile = sample_profile();
  profile.sites[0].pid = 100;
  profile.sites[0].tid = 101;
  profile.sites[1].pid = 200;
  profile.sites[1].tid = 200;
  pb::Profile p = decode([&] {
    std::ostringstream out;
    write_pprof(profile, out, {{100, "./app --serve"}});
    return out.str();
  }());
  auto labels = [&](int sample) {
    std::map<std::string, std::string> found;
    for (const pb::Label& l : p.sample(sample).label()) {
      EXPECT_EQ(l.num(), 0);
      found[str(p, l.key())] = str(p, l.str());
    }
    return found;
  };
  EXPECT_EQ(labels(0), (std::map<std::string, std::string>{{"pid", "100"}, {"thread", "101"}, {"command", "./app --serve"}}));
  EXPECT_EQ(labels(1), (std::map<std::string, std::string>{{"pid", "200"}, {"thread", "200"}})) << "command unknown";
  EXPECT_TRUE(labels(2).empty());
}

TEST(PprofOutput, RecordingTimeAndCommand) {
  Profile profile = sample_profile();
  profile.start_realtime_ns = 1'700'000'000'123'456'789;
  profile.duration_ns = 2'500'000'000;
  profile.command = "./app --serve";
  pb::Profile p = decode(write(profile));
  EXPECT_EQ(p.time_nanos(), 1'700'000'000'123'456'789);
  EXPECT_EQ(p.duration_nanos(), 2'500'000'000);
  ASSERT_EQ(p.comment_size(), 1);
  EXPECT_EQ(str(p, p.comment(0)), "memtrack record -- ./app --serve");
}

// The same file placed elsewhere by another process: its locations still
// fall inside its one mapping, at their file offsets.
TEST(PprofOutput, AddressesAreInTheirMappingWhereverTheFileWasPlaced) {
  Profile profile = sample_profile();
  profile.locations[3].address = 0x555500003030;  // seen in another process first
  profile.locations[1].exact = true;  // an interrupted instruction: its own address
  pb::Profile p = decode(write(profile));
  EXPECT_EQ(p.location(1).address(), 0x400000u + 0x2020);
  for (const pb::Location& l : p.location()) {
    if (l.mapping_id() == 0) continue;
    const pb::Mapping& m = p.mapping(static_cast<int>(l.mapping_id() - 1));
    EXPECT_GE(l.address(), m.memory_start());
    EXPECT_LT(l.address(), m.memory_limit());
    const ProfileLocation& location = profile.locations[l.id() - 1];
    EXPECT_EQ(l.address() - m.memory_start() + m.file_offset(), location.file_offset - (location.exact ? 0 : 1));
  }
}

// Names and paths are bytes; protobuf strings must be UTF-8.
TEST(PprofOutput, InvalidUtf8IsReplacedSoTheProfileParses) {
  Profile profile = sample_profile();
  profile.locations[1].frames[0].function = "ns::f\xff(int)";
  profile.modules[1].path = "/lib/li\xc3\x28" "b.so";
  pb::Profile p = decode(write(profile));
  std::set<std::string> strings(p.string_table().begin(), p.string_table().end());
  EXPECT_TRUE(strings.contains("ns::f\xEF\xBF\xBD(int)"));
  EXPECT_TRUE(strings.contains("/lib/li\xEF\xBF\xBD(b.so"));
}

TEST(PprofOutput, FunctionsAreDistinctPerFile) {
  Profile profile;
  profile.locations.push_back({0x10, -1, 0, {{"helper", "a.cpp", 1, 0, false}}});
  profile.locations.push_back({0x20, -1, 0, {{"helper", "b.cpp", 1, 0, false}}});
  profile.locations.push_back({0x30, -1, 0, {{"helper", "a.cpp", 9, 0, false}}});
  profile.sites.push_back(make_site({0, 1, 2}, make_costs(1, 1, 0, 0, 0, 0)));
  pb::Profile p = decode(write(profile));
  ASSERT_EQ(p.function_size(), 2);
  ASSERT_EQ(p.location_size(), 3);
  EXPECT_EQ(p.location(0).line(0).function_id(), p.location(2).line(0).function_id());
  EXPECT_NE(p.location(0).line(0).function_id(), p.location(1).line(0).function_id());
}

TEST(PprofOutput, AFrameWithoutAFunctionIsNamedByItsAddress) {
  Profile profile;
  profile.locations.push_back({0x10, -1, 0, {{"", "x.c", 3, 0, false}}});
  profile.sites.push_back(make_site({0}, make_costs(1, 1, 0, 0, 0, 0)));
  pb::Profile p = decode(write(profile));
  ASSERT_EQ(p.location_size(), 1);
  EXPECT_EQ(lines_of(p, p.location(0)), (std::vector<std::string>{"[0x10]@3:0"}));
}

// A path cut short ends (outermost) in one shared "[truncated]" location.
TEST(PprofOutput, TruncatedPathsEndInATruncatedFrame) {
  Profile profile = sample_profile();
  profile.sites[1].outcome = StackOutcome::TruncatedCopy;
  profile.sites[3].outcome = StackOutcome::NoCfi;
  pb::Profile p = decode(write(profile));
  ASSERT_EQ(p.location_size(), 7);  // ours, then [truncated] and [no stack] in order of use
  EXPECT_EQ(lines_of(p, p.location(5)), (std::vector<std::string>{"[truncated]@0:0"}));
  EXPECT_EQ(p.location(5).mapping_id(), 0u);
  const std::vector<std::vector<uint64_t>> ids{{1, 2}, {3, 4, 2, 6}, {7}, {5, 2, 6}};
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(std::vector<uint64_t>(p.sample(i).location_id().begin(), p.sample(i).location_id().end()), ids[i]);
}

TEST(PprofOutput, BadIndexesAreErrors) {
  Profile bad_location = sample_profile();
  bad_location.sites[1].locations.push_back(5);
  EXPECT_THROW(write(bad_location), std::runtime_error);
  Profile bad_module = sample_profile();
  bad_module.locations[2].module = 2;
  EXPECT_THROW(write(bad_module), std::runtime_error);
}

// --- go tool pprof -------------------------------------------------------

const char* kNoGoMessage =
    "\n*****************************************************************\n"
    "*** SKIPPED: `go` is not on PATH: the pprof output was NOT read ***\n"
    "*** by go tool pprof. Install golang-go to run this test.       ***\n"
    "*****************************************************************\n";

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::string trim(const std::string& s) {
  size_t begin = s.find_first_not_of(' '), end = s.find_last_not_of(' ');
  return begin == std::string::npos ? "" : s.substr(begin, end - begin + 1);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class GoPprof : public ::testing::Test {
 protected:
  void SetUp() override {
    go_ = find_on_path("go");
    if (go_.empty()) {
      std::fputs(kNoGoMessage, stderr);
      GTEST_SKIP() << kNoGoMessage;
    }
    file_ = dir_.file("memtrack.pb.gz");
    std::ofstream out(file_, std::ios::binary);
    write_pprof(profile_, out);
  }

  // Output of `go tool pprof -symbolize=none ARGS FILE` (it must succeed).
  std::string pprof(std::vector<std::string> args) {
    std::vector<std::string> argv{go_, "tool", "pprof", "-symbolize=none"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(file_);
    // Everything go writes stays in the temporary directory; never the network.
    testing::SpawnOptions options;
    options.env = {{"HOME", dir_.path()},       {"GOCACHE", dir_.file("gocache")}, {"GOPATH", dir_.file("gopath")},
                   {"PPROF_TMPDIR", dir_.path()}, {"GOFLAGS", ""}, {"GOTOOLCHAIN", "local"}, {"GOPROXY", "off"}};
    testing::RunResult r = testing::run_process(argv, std::chrono::seconds(60), options);
    EXPECT_EQ(r.exit_code(), 0) << "go tool pprof failed: " << r.describe();
    return r.out;
  }

  Profile profile_ = sample_profile();
  testing::TempDir dir_;
  std::string go_, file_;
};

TEST_F(GoPprof, RawShowsSampleTypesValuesAndMappings) {
  std::vector<std::string> lines = split_lines(pprof({"-raw"}));
  auto at = [&](const std::string& heading) {
    auto it = std::find(lines.begin(), lines.end(), heading);
    EXPECT_NE(it, lines.end()) << "no \"" << heading << "\" in -raw output";
    return it;
  };
  auto samples = at("Samples:"), locations = at("Locations"), mappings = at("Mappings");
  ASSERT_TRUE(samples < locations && locations < mappings && mappings != lines.end());
  ASSERT_LT(samples + 1, locations);
  EXPECT_EQ(samples[1],
            "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes[dflt] peak_objects/count "
            "peak_space/bytes");

  // "v1 v2 v3 v4: ids" per sample; pprof renumbers locations, so only values.
  std::multiset<std::vector<int64_t>> seen, expected;
  for (auto it = samples + 2; it != locations; ++it) {
    std::istringstream fields(it->substr(0, it->find(':')));
    std::vector<int64_t> values;
    for (int64_t v; fields >> v;) values.push_back(v);
    seen.insert(values);
  }
  for (const ProfileSite& site : profile_.sites)
    expected.insert({static_cast<int64_t>(site.costs.allocations), static_cast<int64_t>(site.costs.allocated_bytes),
                     static_cast<int64_t>(site.costs.leaked_allocations),
                     static_cast<int64_t>(site.costs.leaked_bytes), static_cast<int64_t>(site.costs.peak_allocations),
                     static_cast<int64_t>(site.costs.peak_bytes)});
  EXPECT_EQ(seen, expected);

  std::vector<std::string> mapping_lines;
  for (auto it = mappings + 1; it != lines.end(); ++it) mapping_lines.push_back(trim(*it));
  EXPECT_EQ(mapping_lines,
            (std::vector<std::string>{"1: 0x400000/0x480000/0x0 /usr/bin/app abcdef0123456789 [FN][FL][LN][IN]",
                                      "2: 0x7efffffff000/0x7f0000010000/0x0 /usr/lib/x86_64-linux-gnu/libfoo.so.1"}));
}

TEST_F(GoPprof, TracesShowEveryStackLeafFirst) {
  std::vector<std::string> lines = split_lines(pprof({"-traces", "-sample_index=alloc_objects"}));
  EXPECT_NE(std::find(lines.begin(), lines.end(), "Type: alloc_objects"), lines.end());
  // Blocks between "-----------+---..." lines: "VALUE   leaf" then callers.
  std::multiset<std::vector<std::string>> traces;
  std::vector<std::string> block;
  bool in_traces = false;
  for (const std::string& line : lines) {
    if (line.rfind("-----------+", 0) == 0) {
      if (!block.empty()) traces.insert(block);
      block.clear();
      in_traces = true;
    } else if (in_traces) {
      std::string text = trim(line);
      if (block.empty()) {
        size_t gap = text.find(' ');
        block.push_back(text.substr(0, gap));
        text = trim(text.substr(gap == std::string::npos ? text.size() : gap));
      }
      block.push_back(text);
    }
  }
  EXPECT_EQ(traces, (std::multiset<std::vector<std::string>>{
                        {"10", "inline_helper (inline)", "make_widget", "main"},
                        {"5", "[libfoo.so.1+0x2234]", "make_widget", "main"},
                        {"3", "[no stack]"},
                        {"1", "[0xdead0000]", "main"},
                    }));
}

TEST_F(GoPprof, TotalsPerSampleIndexAreTheSitesSums) {
  struct Index {
    std::vector<std::string> args;  // none: the default sample type
    std::string type;
    uint64_t total;
  };
  const SiteCosts& t = profile_.totals;
  // -unit=B keeps byte totals exact (pprof would round 5626 to 5.49kB).
  for (const Index& index : {Index{{}, "inuse_space", t.leaked_bytes},
                             {{"-sample_index=alloc_objects"}, "alloc_objects", t.allocations},
                             {{"-sample_index=alloc_space", "-unit=B"}, "alloc_space", t.allocated_bytes},
                             {{"-sample_index=inuse_objects"}, "inuse_objects", t.leaked_allocations},
                             {{"-sample_index=inuse_space", "-unit=B"}, "inuse_space", t.leaked_bytes}}) {
    SCOPED_TRACE(index.type);
    std::vector<std::string> args{"-top"};
    args.insert(args.end(), index.args.begin(), index.args.end());
    if (index.args.empty()) args.push_back("-unit=B");
    std::string out = pprof(args);
    EXPECT_NE(out.find("\nType: " + index.type + "\n"), std::string::npos) << out;
    EXPECT_NE(out.find("Build ID: abcdef0123456789\n"), std::string::npos) << out;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, std::regex(" of (\\d+)B? total"))) << out;
    EXPECT_EQ(std::stoull(m[1]), index.total) << out;
  }
}

// Locations of a library without symbols stay apart in pprof's views (they
// were one node named after the file), and cut paths hang under one root.
TEST_F(GoPprof, TopNamesEveryUnsymbolizedAddressAndTruncatedPathsShareOneRoot) {
  Profile profile = sample_profile();
  profile.locations.push_back({0x7f0000003345, 1, 0x3345, {}});  // 5: libfoo again, elsewhere
  profile.sites.push_back(make_site({5, 1}, make_costs(2, 700, 0, 0, 0, 0)));
  profile.sites[1].outcome = StackOutcome::TruncatedCopy;
  profile.totals.allocated_bytes += 700;
  {
    std::ofstream out(file_, std::ios::binary);
    write_pprof(profile, out);
  }
  std::string top = pprof({"-top", "-sample_index=alloc_space", "-unit=B"});
  EXPECT_NE(top.find(" [libfoo.so.1+0x2234]\n"), std::string::npos) << top;
  EXPECT_NE(top.find(" [libfoo.so.1+0x3345]\n"), std::string::npos) << top;
  std::string roots = pprof({"-top", "-cum", "-sample_index=alloc_space", "-unit=B", "-focus=^\\[truncated\\]$"});
  EXPECT_NE(roots.find(" [truncated]\n"), std::string::npos) << roots;
}

}  // namespace
}  // namespace memtrack
