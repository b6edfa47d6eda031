// An artifact with Stack records through its consumers: `memtrack info`
// counts definitions and allocations that refer to one, `memtrack dump`
// prints them, and the heap analysis is the same as without them.
#include <gmock/gmock.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "analyze/heap_replay.h"
#include "cli/info.h"
#include "format/artifact.h"
#include "format_test_support.h"
#include "output/json_output.h"

namespace memtrack::test {
namespace {

constexpr int32_t kPid = 300;
// The top bit set: a JSON number read as a double would lose the low bits.
constexpr uint64_t kHash = 0xfedc'ba98'7654'3211;

Event stack_record(int32_t pid, uint64_t timestamp, uint64_t hash, size_t bytes) {
  StackDefinition definition;
  definition.hash = hash;
  definition.chain = {0x5555'5555'1234, 0x7f00'0000'2000};
  definition.end = StackEnd::NoRule;
  definition.miss_pc = 0x7f00'0000'3000;
  definition.sp = 0x7ffc'0000'0000;
  for (uint64_t r = 0; r < 17; ++r) definition.regs.push_back(r * 3);
  for (size_t i = 0; i < bytes; ++i) definition.bytes.push_back(static_cast<uint8_t>(i * 7));
  definition.truncated = true;
  Event event;
  event.type = EventType::Stack;
  event.pid = pid;
  event.tid = pid;
  event.timestamp = timestamp;
  event.stack = std::make_shared<const StackDefinition>(std::move(definition));
  return event;
}

Event allocation(EventType type, uint64_t timestamp, uint64_t addr, uint64_t stack_hash) {
  Event event = alloc_event(type, kPid, timestamp, addr, 100);
  event.pid = kPid;
  event.stack_hash = stack_hash;
  return event;
}

// Allocations of kPid, four of them with a stack, and the Stack records they
// refer to before them.
std::vector<Event> trace_with_stacks() {
  Event realloc_event = allocation(EventType::Realloc, 13, 0x4000, kHash);
  realloc_event.old_addr = 0x1000;
  Event free_event = alloc_event(EventType::Free, kPid, 17, 0x2000, 0);
  free_event.pid = kPid;
  return {stack_record(kPid, 10, kHash, 8192),
          allocation(EventType::Malloc, 11, 0x1000, kHash),
          allocation(EventType::Calloc, 12, 0x2000, 0),
          realloc_event,
          stack_record(kPid, 14, 7, 16),
          allocation(EventType::AlignedAlloc, 15, 0x5000, 7),
          allocation(EventType::Malloc, 16, 0x6000, 7),
          free_event,
          allocation(EventType::Malloc, 18, 0x7000, 0)};
}

TEST(StackConsumers, InfoCountsDefinitionsAndAllocationsWithAStack) {
  TempDir dir;
  ArtifactTrailer trailer;
  trailer.counters = {{"stack_definitions_lost", 2}, {"stacks_captured", 9}};
  {
    ArtifactWriter writer(dir.file("a.memtrack"), ArtifactHeader{});
    writer.append(trace_with_stacks());
    writer.finish(trailer);
  }

  std::ostringstream out;
  EXPECT_EQ(run_info(dir.file("a.memtrack"), "json", out), 0);
  nlohmann::json info = nlohmann::json::parse(out.str());
  EXPECT_EQ(info["events"], 9);
  EXPECT_EQ(info["stack_definitions"], 2);
  EXPECT_EQ(info["events_by_type"]["Stack"], 2);
  EXPECT_EQ(info["allocations_with_stack"], 4);
  EXPECT_EQ(info["counters"], nlohmann::json(trailer.counters));
  EXPECT_EQ(info["intact"], true);
}

// Commands and paths come from the recorded system and need not be UTF-8:
// info shows them (with replacement characters) instead of failing.
TEST(StackConsumers, InfoShowsTextThatIsNotUtf8) {
  TempDir dir;
  ArtifactHeader header;
  header.command = {"./caf\xe9", "--x"};
  {
    ArtifactWriter writer(dir.file("a.memtrack"), header);
    writer.finish({});
  }
  for (const char* format : {"json", "text"}) {
    std::ostringstream out;
    EXPECT_EQ(run_info(dir.file("a.memtrack"), format, out), 0) << format;
    EXPECT_NE(out.str().find("caf"), std::string::npos) << format;
  }
}

TEST(StackConsumers, DumpPrintsDefinitionsAndTheHashesThatReferToThem) {
  TempDir dir;
  write_artifact(dir.file("a.memtrack"), trace_with_stacks());

  std::ostringstream out;
  ASSERT_EQ(run_dump(dir.file("a.memtrack"), out), 0);
  std::vector<nlohmann::json> lines;
  std::istringstream in(out.str());
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 9u);

  const nlohmann::json& big = lines[0];
  EXPECT_EQ(big["type"], "Stack");
  EXPECT_EQ(big["hash"], "0xfedcba9876543211");
  EXPECT_EQ(big["end"], "no-rule");
  EXPECT_EQ(big["chain"], nlohmann::json({0x5555'5555'1234, 0x7f00'0000'2000}));
  EXPECT_EQ(big["miss_pc"], 0x7f00'0000'3000);
  EXPECT_EQ(big["sp"], 0x7ffc'0000'0000);
  ASSERT_EQ(big["regs"].size(), 17u);
  EXPECT_EQ(big["regs"][16], 48);
  EXPECT_EQ(big["bytes_len"], 8192);
  std::string head;  // the first 64 bytes, i * 7
  for (int i = 0; i < 64; ++i) head += fmt::format("{:02x}", static_cast<uint8_t>(i * 7));
  EXPECT_EQ(big["bytes_head"], head);
  EXPECT_EQ(big["truncated"], true);
  EXPECT_EQ(lines[4]["hash"], "0x0000000000000007");
  EXPECT_EQ(lines[4]["bytes_head"], "00070e151c232a31383f464d545b6269");  // all 16 bytes

  // Allocations name their stack as the definition does; without one, no key.
  EXPECT_EQ(lines[1]["stack_hash"], big["hash"]);
  EXPECT_EQ(lines[3]["stack_hash"], big["hash"]);
  EXPECT_EQ(lines[5]["stack_hash"], lines[4]["hash"]);
  EXPECT_FALSE(lines[2].contains("stack_hash"));
  EXPECT_FALSE(lines[7].contains("stack_hash"));  // a Free
  EXPECT_FALSE(lines[8].contains("stack_hash"));
}

std::string analysed(const std::string& path) {
  HeapReplay analyzer;
  ReadResult result = read_artifact(path, [&](const Event& event) { analyzer.on_event(event); });
  std::ostringstream report;
  analyzer.finish();
  write_json_report(analyzer.build_report(result.header, result.trailer, result.warnings), report);
  return report.str();
}

// Stack records are no heap events: not counted, no process of their own,
// no effect on the timeline (one comes last, after every other record).
TEST(StackConsumers, TheAnalysisIgnoresStackRecords) {
  TempDir dir;
  std::vector<Event> with_stacks = trace_with_stacks();
  with_stacks.push_back(stack_record(kPid + 1, 1'000'000, 99, 64));  // a pid with nothing else
  std::vector<Event> without_stacks;
  for (const Event& event : with_stacks) {
    if (event.type != EventType::Stack) without_stacks.push_back(event);
  }
  write_artifact(dir.file("with.memtrack"), with_stacks);
  write_artifact(dir.file("without.memtrack"), without_stacks);

  std::string report = analysed(dir.file("with.memtrack"));
  EXPECT_EQ(report, analysed(dir.file("without.memtrack")));
  nlohmann::json json = nlohmann::json::parse(report);
  EXPECT_EQ(json["events"], without_stacks.size());
  EXPECT_EQ(json["processes"].size(), 1u);
}

}  // namespace
}  // namespace memtrack::test

namespace memtrack::test {
namespace {

// Issue 9, item 7: a trailer counter changed from 0 to 5 used to leave
// `intact: true`; info now says the artifact is not intact, and why.
TEST(IntegrityConsumers, InfoReportsADamagedTrailer) {
  TempDir dir;
  {
    ArtifactWriter writer(dir.file("a.memtrack"), ArtifactHeader{});
    writer.append(trace_with_stacks());
    writer.finish(ArtifactTrailer{.counters = {{"kernel_events_lost", 0}}});
  }
  Bytes file = read_bytes(dir.file("a.memtrack"));
  const std::string key = "kernel_events_lost";
  auto at = std::search(file.begin(), file.end(), key.begin(), key.end());
  ASSERT_NE(at, file.end());
  at[static_cast<std::ptrdiff_t>(key.size())] = 0x05;
  write_bytes(dir.file("a.memtrack"), file);

  std::ostringstream out;
  EXPECT_EQ(run_info(dir.file("a.memtrack"), "json", out), 1);
  nlohmann::json info = nlohmann::json::parse(out.str());
  EXPECT_EQ(info["intact"], false);
  EXPECT_EQ(info["counters"]["kernel_events_lost"], 5);
  ASSERT_EQ(info["warnings"].size(), 1u);
  EXPECT_THAT(info["warnings"][0].get<std::string>(), ::testing::HasSubstr("the trailer's checksum does not match"));
}

}  // namespace
}  // namespace memtrack::test
