// Module records (record --embed-modules): round trip through the writer and
// the reader, their layout as msgpack-cxx reads it, and how readers from
// before Module see a file holding them (they skip each one alone).
#include <gtest/gtest.h>

#include "format_test_support.h"

namespace memtrack::test {
namespace {

SectionBytes section(uint64_t address, size_t size, uint8_t fill) {
  return {address, std::vector<uint8_t>(size, fill)};
}

// Every field set, symbols unsorted so the address differences wrap.
ModuleInfo full_module() {
  ModuleInfo m;
  m.path = "/usr/lib/libfull.so";
  m.build_id = std::vector<uint8_t>(20, 0xab);
  m.load_segments = {{0, 0, 0x1000, 0x1000, 4}, {0x1000, 0x1000, 0x2345, 0x2345, 5}, {0x4000, 0x3000, 0x10, 0x80, 6}};
  m.symbols = {{0x1000, 0x20, "first"}, {0x1000, 0x20, "first_alias"}, {0x1fff0, 0x10, "far"}, {0x1100, 8, "back"}};
  m.eh_frame = section(0x3800, 300, 0xe1);
  m.eh_frame_hdr = section(0x3700, 40, 0xe2);
  m.debug_link = DebugLink{"libfull.so.debug", 0xdeadbeef};
  m.debug_file = "/usr/lib/debug/.build-id/ab/abab.debug";
  return m;
}

// Identified by device and inode, CFI in .debug_frame, no symbols.
ModuleInfo sparse_module() {
  ModuleInfo m;
  m.path = "/opt/bin/tool";
  m.dev = (8u << 20) | 1;
  m.ino = 123456;
  m.debug_frame = section(0, 77, 0xdf);
  return m;
}

std::vector<Event> some_allocations() { return random_events(50, 7); }

struct Written {
  std::vector<Event> events;
  std::vector<ModuleInfo> modules;
};

Written write_with_modules(const std::string& path) {
  Written w{some_allocations(), {full_module(), sparse_module()}};
  ArtifactWriter writer(path, ArtifactHeader{});
  writer.append(std::span(w.events).first(20));
  writer.append_module(std::make_shared<const ModuleInfo>(w.modules[0]));
  writer.append(std::span(w.events).subspan(20));
  writer.append_module(std::make_shared<const ModuleInfo>(w.modules[1]));
  writer.finish(ArtifactTrailer{});
  return w;
}

TEST(ModuleRecord, RoundTripsWithTheEventsAroundIt) {
  TempDir dir;
  const Written written = write_with_modules(dir.file("a"));
  std::vector<Event> events;
  std::vector<ModuleInfo> modules;
  ReadResult result = read_artifact(
      dir.file("a"), [&](const Event& e) { events.push_back(e); }, [&](const ModuleInfo& m) { modules.push_back(m); });
  EXPECT_EQ(events, written.events);
  EXPECT_EQ(modules, written.modules);
  EXPECT_EQ(result.stats.events, written.events.size());
  EXPECT_EQ(result.stats.modules, 2u);
  EXPECT_EQ(result.stats.skipped_records, 0u);
  // The trailer counts modules among the records: no mismatch warning.
  ASSERT_TRUE(result.trailer);
  EXPECT_EQ(result.trailer->events, written.events.size() + 2);
  EXPECT_TRUE(result.warnings.empty()) << result.warnings.front();
  // Each module has a frame of its own, after the events appended before it.
  EXPECT_EQ(result.stats.frames, 4u);

  // Read without a module callback: counted, not delivered, no warning.
  ReadBack plain = read_back(dir.file("a"));
  EXPECT_EQ(plain.events, written.events);
  EXPECT_EQ(plain.result.stats.modules, 2u);
  EXPECT_TRUE(plain.result.warnings.empty());
}

TEST(ModuleRecord, LayoutAsAGenericMessagePackReaderSeesIt) {
  TempDir dir;
  write_with_modules(dir.file("a"));
  Bytes file = read_bytes(dir.file("a"));
  std::vector<FrameSpan> frames = split_frames(file);
  ASSERT_EQ(frames.size(), 6u);  // header, events, module, events, module, trailer
  Bytes content = decompress_frame(file, frames[2]);
  msgpack::object_handle handle = msgpack::unpack(reinterpret_cast<const char*>(content.data()), content.size());
  const msgpack::object_map& map = handle.get().via.map;
  std::vector<std::string> keys;
  std::map<std::string, msgpack::object> values;
  for (uint32_t i = 0; i < map.size; ++i) {
    keys.push_back(map.ptr[i].key.as<std::string>());
    values[keys.back()] = map.ptr[i].val;
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"type", "path", "build_id", "segments", "symbol_addresses", "symbol_sizes",
                                            "symbol_names", "eh_frame", "eh_frame_address", "eh_frame_hdr",
                                            "eh_frame_hdr_address", "debug_link", "debug_link_crc", "debug_file"}));
  EXPECT_EQ(values["type"].as<std::string>(), "Module");
  EXPECT_EQ(values["build_id"].type, msgpack::type::BIN);
  EXPECT_EQ(values["eh_frame"].type, msgpack::type::BIN);
  EXPECT_EQ(values["segments"].as<std::vector<std::vector<uint64_t>>>()[1],
            (std::vector<uint64_t>{0x1000, 0x1000, 0x2345, 0x2345, 5}));
  // Differences from the previous address, modulo 2^64.
  EXPECT_EQ(values["symbol_addresses"].as<std::vector<uint64_t>>(),
            (std::vector<uint64_t>{0x1000, 0, 0x1eff0, uint64_t{0x1100} - 0x1fff0}));
  EXPECT_EQ(values["symbol_names"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"first", "first_alias", "far", "back"}));
  EXPECT_EQ(values["debug_link_crc"].as<uint64_t>(), 0xdeadbeefu);

  Bytes sparse = decompress_frame(file, frames[4]);
  msgpack::object_handle sparse_handle =
      msgpack::unpack(reinterpret_cast<const char*>(sparse.data()), sparse.size());
  std::vector<std::string> sparse_keys;
  for (uint32_t i = 0; i < sparse_handle.get().via.map.size; ++i)
    sparse_keys.push_back(sparse_handle.get().via.map.ptr[i].key.as<std::string>());
  EXPECT_EQ(sparse_keys, (std::vector<std::string>{"type", "path", "dev", "ino", "segments", "symbol_addresses",
                                                   "symbol_sizes", "symbol_names", "debug_frame"}));
}

// A reader that predates Module: it knows every event type but not the
// name "Module", so it skips each Module record alone and reads every event
// around it, without tripping over the Module keys it shares with Mapping
// (path, build_id, dev, ino: same types).
TEST(ModuleRecord, OlderReadersSkipItAndReadEveryEventAround) {
  TempDir dir;
  const Written written = write_with_modules(dir.file("a"));
  Decoded old_view = decode_frames_as(read_bytes(dir.file("a")), records::kAllTypes);
  EXPECT_EQ(old_view.events, written.events);
  EXPECT_EQ(old_view.skipped, 2u);
}

TEST(ModuleRecord, SymbolColumnsOfDifferentLengthsAreACorruptFrame) {
  TempDir dir;
  write_with_modules(dir.file("a"));
  Bytes file = read_bytes(dir.file("a"));
  std::vector<FrameSpan> frames = split_frames(file);
  // Rebuild the sparse module's frame with one size too many.
  msgpack::sbuffer content;
  Packer packer(content);
  packer.pack_map(5);
  pack_key(packer, "type");
  pack_key(packer, "Module");
  pack_key(packer, "path");
  pack_key(packer, "/x");
  pack_key(packer, "symbol_addresses");
  packer.pack(std::vector<uint64_t>{0x10});
  pack_key(packer, "symbol_sizes");
  packer.pack(std::vector<uint64_t>{1, 2});
  pack_key(packer, "symbol_names");
  packer.pack(std::vector<std::string>{"f"});
  Bytes damaged;
  for (size_t i = 0; i < 4; ++i) append(damaged, slice(file, frames[i]));
  append(damaged, zstd_frame(content));
  write_bytes(dir.file("b"), damaged);
  ReadResult result = read_artifact(dir.file("b"), [](const Event&) {}, [](const ModuleInfo&) {});
  ASSERT_TRUE(result.error);
  EXPECT_NE(result.error->find("symbol columns"), std::string::npos) << *result.error;
  EXPECT_EQ(result.stats.modules, 1u);  // the first one, before the damage
}

TEST(ModuleRecord, WriterRejectsAModuleAboveTheFrameLimit) {
  TempDir dir;
  ArtifactWriter writer(dir.file("a"), ArtifactHeader{});
  auto huge = std::make_shared<ModuleInfo>();
  huge->eh_frame = section(0, kMaxFrameBytes, 0);
  EXPECT_THROW(writer.append_module(huge), std::invalid_argument);
  writer.finish(ArtifactTrailer{});
}

}  // namespace
}  // namespace memtrack::test
