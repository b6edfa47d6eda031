// End to end: `memtrack record --stacks` of fx_export_dlopen, which dlopens
// libfx_export_lib.so at two addresses in turn and allocates through it,
// then `memtrack export-modules`. Every return address of every recorded
// call path must lie in an exported placement of its process at its time,
// and the library's frames must symbolize, through their placement's load
// bias and the exported symbols, to the function that called malloc.
#include <limits.h>

#include <gtest/gtest.h>

#include <set>

#include "export_test_support.h"
#include "format/artifact.h"
#include "support/build_file.h"

namespace memtrack::testing {
namespace {

using nlohmann::json;

struct Capture {
  int32_t pid = 0;
  uint64_t timestamp = 0;
  std::vector<uint64_t> chain;
};

// The placement of `pid` holding `address` at `at_ns`, or nullptr.
const json* placement_at(const json& metadata, int32_t pid, uint64_t address, int64_t at_ns) {
  const json& process = metadata["processes"][std::to_string(pid)];
  for (const json& p : process["placements"]) {
    if (address < p["start"].get<uint64_t>() || address >= p["end"].get<uint64_t>()) continue;
    if (at_ns < p["from_ns"].get<int64_t>() || (!p["to_ns"].is_null() && at_ns >= p["to_ns"].get<int64_t>())) continue;
    return &p;
  }
  return nullptr;
}

TEST(ExportEndToEnd, EveryReturnAddressLiesInAnExportedPlacementAndSymbolizes) {
  MEMTRACK_REQUIRE_BPF_PRIVILEGES();
  TempDir dir;
  char lib[PATH_MAX];
  ASSERT_NE(realpath(FX_EXPORT_LIB, lib), nullptr);
  const RunResult recorded = run_process(
      {MEMTRACK_BIN, "record", "-q", "--stacks", "-o", dir.file("a.zst"), "--", FX_EXPORT_DLOPEN, lib},
      std::chrono::seconds(120));
  ASSERT_EQ(recorded.exit_code(), 0) << recorded.describe();
  std::set<uint64_t> placed;  // where the fixture saw the library's code
  std::istringstream lines(recorded.out);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("placed ")) placed.insert(std::stoull(line.substr(7), nullptr, 16));
  ASSERT_EQ(placed.size(), 2u) << recorded.out;

  const RunResult exported =
      run_process({MEMTRACK_BIN, "export-modules", dir.file("a.zst"), dir.file("modules")}, std::chrono::seconds(60));
  EXPECT_EQ(exported.exit_code(), 0) << exported.describe();
  const json metadata = read_json(dir.file("modules/memtrack.metadata"));

  std::string lib_key, libc_key;
  for (const auto& [key, file] : metadata["files"].items()) {
    EXPECT_EQ(file["status"], "exported") << key << ": " << file.dump();
    if (file["path"] == lib) lib_key = key;
    if (file["path"].get<std::string>().ends_with("/libc.so.6")) libc_key = key;
  }
  ASSERT_FALSE(lib_key.empty()) << "the library is not among the exported files";
  ASSERT_FALSE(libc_key.empty()) << "libc is not among the exported files";
  for (const std::string& key : {lib_key, libc_key}) {
    const json& file = metadata["files"][key];
    EXPECT_EQ(file["missing"], json::array()) << key;
    EXPECT_FALSE(file["symbols_file"].is_null()) << key;
    EXPECT_FALSE(file["eh_frame"].is_null()) << key;
  }
  const std::vector<MapLine> lib_symbols =
      read_symbols_map(dir.file("modules/" + metadata["files"][lib_key]["symbols_file"].get<std::string>()));

  // The fixture's process has both placements of the library, where it saw
  // them, with one bias each that maps them onto the same code segment.
  int32_t fixture_pid = 0;
  std::set<uint64_t> lib_starts;
  std::set<int64_t> lib_link_starts;
  for (const auto& [pid, process] : metadata["processes"].items())
    for (const json& p : process["placements"])
      if (p["key"] == lib_key) {
        fixture_pid = std::stoi(pid);
        lib_starts.insert(p["start"].get<uint64_t>());
        lib_link_starts.insert(p["start"].get<int64_t>() - p["load_bias"].get<int64_t>());
      }
  EXPECT_EQ(lib_starts, placed);
  EXPECT_EQ(lib_link_starts.size(), 1u);

  std::vector<Capture> captures;
  ReadResult read = read_artifact(dir.file("a.zst"), [&](const Event& e) {
    if (e.type == EventType::Stack && e.stack)
      captures.push_back({e.pid, e.timestamp, e.stack->chain});
  });
  ASSERT_FALSE(read.error) << *read.error;

  size_t addresses = 0;
  std::set<uint64_t> alloc_frames;  // placements of the library with a frame in fx_export_alloc
  for (const Capture& c : captures) {
    const int64_t at_ns = static_cast<int64_t>(c.timestamp - read.header.start_monotonic_ns);
    for (size_t i = 0; i < c.chain.size(); ++i) {
      // A return address follows its call: the call is at address - 1.
      const uint64_t call = c.chain[i] - 1;
      const json* p = placement_at(metadata, c.pid, call, at_ns);
      ++addresses;
      ASSERT_NE(p, nullptr) << "pid " << c.pid << " at " << at_ns << " ns: 0x" << std::hex << c.chain[i]
                            << " is in no exported placement";
      EXPECT_EQ(metadata["files"][(*p)["key"].get<std::string>()]["status"], "exported");
      if (i != 0 || (*p)["key"] != lib_key) continue;
      // chain[0] returns into malloc's caller: fx_export_alloc.
      const uint64_t link = call - static_cast<uint64_t>((*p)["load_bias"].get<int64_t>());
      std::string name = "(none)";
      for (const MapLine& s : lib_symbols)
        if (s.address <= link && link < s.address + s.size) name = s.name;
      EXPECT_EQ(name, "fx_export_alloc") << std::hex << "link-time address 0x" << link;
      EXPECT_EQ(c.pid, fixture_pid);
      alloc_frames.insert((*p)["start"].get<uint64_t>());
    }
  }
  EXPECT_GT(addresses, 0u) << "no Stack record has a return address";
  EXPECT_EQ(alloc_frames, placed) << "call paths through each placement of the library";
}

}  // namespace
}  // namespace memtrack::testing
