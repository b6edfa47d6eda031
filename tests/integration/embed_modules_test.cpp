// End to end: `memtrack record --stacks --embed-modules` of fx_export_dlopen
// on a copy of libfx_export_lib.so in a temporary directory, then
// `memtrack export-modules` after the copy is deleted. The export must
// succeed from the artifact alone and write exactly what an export from the
// files on disk writes (the same artifact, its Module records left out).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "format/artifact.h"
#include "support/test_support.h"

namespace memtrack::testing {
namespace {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::map<std::string, std::string> dir_contents(const std::string& dir) {
  std::map<std::string, std::string> contents;
  for (const auto& entry : fs::directory_iterator(dir))
    contents[entry.path().filename().string()] = read_file(entry.path().string());
  return contents;
}

RunResult export_modules(const std::string& artifact, const std::string& dir) {
  return run_process({MEMTRACK_BIN, "export-modules", artifact, dir}, std::chrono::seconds(60));
}

// `memtrack report --format json` of `artifact` (with `extra` options): the
// outcomes of the sites whose frames pass through `lib`, and the first
// frame's function of the last of them.
std::map<std::string, int> library_sites(const std::string& artifact, const std::string& lib,
                                         const std::vector<std::string>& extra, std::string* first_frame) {
  std::vector<std::string> command{MEMTRACK_BIN, "report", "--format", "json", "--top", "0"};
  command.insert(command.end(), extra.begin(), extra.end());
  command.push_back(artifact);
  const RunResult report = run_process(command, std::chrono::seconds(60));
  EXPECT_EQ(report.exit_code(), 0) << report.describe();
  std::map<std::string, int> outcomes;
  const nlohmann::json document = nlohmann::json::parse(report.out);
  for (const nlohmann::json& site : document["profile"]["sites"]) {
    const nlohmann::json& frames = site["frames"];
    bool through_library = std::any_of(frames.begin(), frames.end(),
                                       [&](const nlohmann::json& frame) { return frame["module"] == lib; });
    if (!through_library) continue;
    ++outcomes[site["outcome"].get<std::string>()];
    *first_frame = frames.front()["function"].get<std::string>();
  }
  return outcomes;
}

// `memtrack record --stacks OPTIONS -o DIR/a.zst -- fx_export_dlopen LIB`
// on a copy LIB of libfx_export_lib.so in DIR (so the test can delete it).
struct LibraryRecording {
  std::string lib;
  std::string artifact;
  RunResult run;
};
LibraryRecording record_with_library_copy(const TempDir& dir, const std::vector<std::string>& options) {
  LibraryRecording r{dir.file("libfx_export_lib.so"), dir.file("a.zst"), {}};
  fs::copy_file(FX_EXPORT_LIB, r.lib);
  std::vector<std::string> command{MEMTRACK_BIN, "record", "--stacks"};
  command.insert(command.end(), options.begin(), options.end());
  for (const std::string& arg : {std::string("-o"), r.artifact, std::string("--"), std::string(FX_EXPORT_DLOPEN), r.lib})
    command.push_back(arg);
  r.run = run_process(command, std::chrono::seconds(120));
  return r;
}

TEST(EmbeddedModules, ExportRunsFromTheArtifactWhenTheLibraryIsGone) {
  MEMTRACK_REQUIRE_BPF_PRIVILEGES();
  TempDir dir;
  const auto [lib, artifact, recorded] = record_with_library_copy(dir, {"--embed-modules"});
  ASSERT_EQ(recorded.exit_code(), 0) << recorded.describe();
  EXPECT_EQ(recorded.err.find("not embedded"), std::string::npos) << recorded.err;

  std::vector<Event> events;
  std::vector<std::string> module_paths;
  const ReadResult read = read_artifact(
      artifact, [&](const Event& e) { events.push_back(e); },
      [&](const ModuleInfo& m) { module_paths.push_back(m.path); });
  ASSERT_FALSE(read.error) << *read.error;
  ASSERT_TRUE(read.trailer);
  EXPECT_TRUE(read.warnings.empty()) << read.warnings.front();
  const auto& features = read.header.features;
  EXPECT_NE(std::find(features.begin(), features.end(), "modules-embedded"), features.end());
  EXPECT_EQ(read.trailer->counters.at("modules_not_embedded"), 0u);
  EXPECT_EQ(read.trailer->counters.at("modules_embedded"), module_paths.size());
  // The fixture, the library, libc and the dynamic loader at least.
  EXPECT_GE(module_paths.size(), 4u);
  EXPECT_NE(std::find(module_paths.begin(), module_paths.end(), lib), module_paths.end());

  // From disk: the same artifact, at the same path (the metadata quotes it),
  // without its Module records.
  const std::string with_modules = read_file(artifact);
  auto write_without_modules = [&] {
    ArtifactWriter writer(artifact, read.header);
    writer.append(events);
    writer.finish(*read.trailer);
  };
  write_without_modules();
  const RunResult from_disk = export_modules(artifact, dir.file("from-disk"));
  ASSERT_EQ(from_disk.exit_code(), 0) << from_disk.describe();

  std::ofstream(artifact, std::ios::binary | std::ios::trunc) << with_modules;
  fs::remove(lib);
  const RunResult embedded = export_modules(artifact, dir.file("embedded"));
  EXPECT_EQ(embedded.exit_code(), 0) << embedded.describe();
  EXPECT_EQ(dir_contents(dir.file("embedded")), dir_contents(dir.file("from-disk")));

  // The control: without the Module records, the deleted library is missing.
  write_without_modules();
  const RunResult without = export_modules(artifact, dir.file("without"));
  EXPECT_EQ(without.exit_code(), 1) << without.describe();
  EXPECT_NE(without.err.find(lib + ": cannot open"), std::string::npos) << without.err;
}

// The report on "another machine": the library is gone, so its symbols and
// CFI come from its Module record. Raw copies (unwound offline) go through
// the library to main; without the Module records they cannot.
TEST(EmbeddedModules, ReportUnwindsAndNamesFromTheArtifactWhenTheLibraryIsGone) {
  MEMTRACK_REQUIRE_BPF_PRIVILEGES();
  TempDir dir;
  const auto [lib, artifact, recorded] = record_with_library_copy(dir, {"--stack-mode", "raw", "--embed-modules"});
  ASSERT_EQ(recorded.exit_code(), 0) << recorded.describe();
  fs::remove(lib);

  std::string first;
  std::map<std::string, int> with_modules = library_sites(artifact, lib, {}, &first);
  // One site per placement's caller line in main.
  EXPECT_EQ(with_modules, (std::map<std::string, int>{{"complete", 2}}));
  EXPECT_EQ(first, "fx_export_alloc");

  std::vector<Event> events;
  ReadResult read = read_artifact(artifact, [&](const Event& e) { events.push_back(e); });
  {
    ArtifactWriter writer(artifact, read.header);
    writer.append(events);
    writer.finish(*read.trailer);
  }
  std::map<std::string, int> without_modules = library_sites(artifact, lib, {}, &first);
  EXPECT_EQ(without_modules.count("complete"), 0u);
  EXPECT_EQ(without_modules.count("missing-module"), 1u) << "both placements stop in the library";
  EXPECT_EQ(first.rfind("[libfx_export_lib.so+0x", 0), 0u) << first;
}

// The same from export-modules' output: recorded without --embed-modules,
// exported while the library exists, reported after it is gone.
TEST(EmbeddedModules, ReportUsesExportedModulesWhenTheLibraryIsGone) {
  MEMTRACK_REQUIRE_BPF_PRIVILEGES();
  TempDir dir;
  const auto [lib, artifact, recorded] = record_with_library_copy(dir, {"--stack-mode", "raw"});
  ASSERT_EQ(recorded.exit_code(), 0) << recorded.describe();
  const RunResult exported = export_modules(artifact, dir.file("modules"));
  ASSERT_EQ(exported.exit_code(), 0) << exported.describe();
  fs::remove(lib);

  std::string first;
  EXPECT_EQ(library_sites(artifact, lib, {"--modules", dir.file("modules")}, &first),
            (std::map<std::string, int>{{"complete", 2}}));
  EXPECT_EQ(first, "fx_export_alloc");
  EXPECT_EQ(library_sites(artifact, lib, {}, &first), (std::map<std::string, int>{{"missing-module", 1}}));

  const RunResult bad = run_process({MEMTRACK_BIN, "report", "--modules", dir.file("nothing-here"), artifact},
                                    std::chrono::seconds(60));
  EXPECT_EQ(bad.exit_code(), 3);  // no output: an input cannot be read
  EXPECT_NE(bad.err.find("nothing-here/memtrack.metadata"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace memtrack::testing
