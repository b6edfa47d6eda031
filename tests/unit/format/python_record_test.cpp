// PythonCode records and Stack records' python_frames: round trips,
// wrong-typed values (the reader calls the frame corrupt, never crashes),
// and what a reader that predates them keeps.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "format/artifact.h"
#include "format/records.h"
#include "format_test_support.h"

namespace memtrack::test {
namespace {

Event python_code_event(uint64_t id, uint64_t timestamp) {
  auto code = std::make_shared<PythonCode>();
  code->id = id;
  code->name = "<listcomp>";
  code->qualname = "many_strings.<locals>.<listcomp>";
  code->filename = "/srv/app/\xc3\xa9t\xc3\xa9.py";  // UTF-8 as the interposer writes it
  code->first_line = 33;
  code->line_table = {0x80, 0x00, 0xd8, 0x09};
  code->line_table_cut = id % 2 == 0;
  Event event;
  event.type = EventType::PythonCode;
  event.pid = 7;
  event.tid = 8;
  event.timestamp = timestamp;
  event.python_code = std::move(code);
  return event;
}

TEST(PythonRecord, CodeAndFramesRoundTrip) {
  TempDir dir;
  std::vector<Event> events = {python_code_event(1, 1), python_code_event(std::numeric_limits<uint64_t>::max(), 2)};
  StackDefinition stack;
  stack.hash = 5;
  stack.chain = {0x401000, 0x402000};
  stack.python_frames = {1, uint64_t{1} << 32 | 17, std::numeric_limits<uint64_t>::max(),
                         uint64_t{1} << 32 | 0xffffffffu};
  Event stack_event;
  stack_event.type = EventType::Stack;
  stack_event.timestamp = 3;
  stack_event.stack = std::make_shared<const StackDefinition>(stack);
  events.push_back(stack_event);
  write_artifact(dir.file("a.memtrack"), events);

  ReadBack back = read_back(dir.file("a.memtrack"));
  EXPECT_EQ(back.events, events);
  EXPECT_FALSE(back.result.error);
  EXPECT_EQ(back.result.stats.skipped_records, 0u);
}

TEST(PythonRecord, WrongTypesAreCorrupt) {
  TempDir dir;
  for (const auto& pack_bad_entry : std::vector<std::function<void(Packer&)>>{
           [](Packer& p) { pack_key(p, "code_id"), p.pack(-1); },
           [](Packer& p) { pack_key(p, "name"), p.pack(1); },
           [](Packer& p) { pack_key(p, "qualname"), p.pack_nil(); },
           [](Packer& p) { pack_key(p, "filename"), p.pack(std::vector<int>{1}); },
           [](Packer& p) { pack_key(p, "first_line"), p.pack(-3); },
           [](Packer& p) { pack_key(p, "first_line"), p.pack(uint64_t{1} << 40); },
           [](Packer& p) { pack_key(p, "line_table"), pack_key(p, "abc"); },
           [](Packer& p) { pack_key(p, "line_table"), p.pack_bin(4), p.pack_bin_body("ab", 2); },
           [](Packer& p) { pack_key(p, "line_table_cut"), p.pack(2); },
       }) {
    msgpack::sbuffer content;
    Packer packer(content);
    packer.pack_map(2);
    pack_key(packer, "type");
    pack_key(packer, "PythonCode");
    pack_bad_entry(packer);
    EXPECT_TRUE(first_frame_corrupt(read_hand_made_frame(dir, content)));
  }
  for (const auto& pack_bad_entry : std::vector<std::function<void(Packer&)>>{
           [](Packer& p) { pack_key(p, "python_frames"), p.pack(1); },
           [](Packer& p) { pack_key(p, "python_frames"), p.pack(std::vector<int>{1, -2}); },
           [](Packer& p) { pack_key(p, "python_frames"), p.pack_array(0xffffffff), p.pack(1); },
       }) {
    msgpack::sbuffer content;
    Packer packer(content);
    packer.pack_map(2);
    pack_key(packer, "type");
    pack_key(packer, "Stack");
    pack_bad_entry(packer);
    EXPECT_TRUE(first_frame_corrupt(read_hand_made_frame(dir, content)));
  }
}

}  // namespace
}  // namespace memtrack::test
