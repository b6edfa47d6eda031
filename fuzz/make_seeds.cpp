// Writes the fuzzers' seed corpora: small artifacts and records of every
// kind, an export-modules directory packed into one input, suppressions.
// Usage: fuzz_make_seeds OUT_DIR ELF_FILE (fuzz/make_seeds.sh runs it).

#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "analyze/heap_aggregate.h"
#include "format/artifact.h"
#include "format/records.h"
#include "module/module_elf.h"

namespace {

using namespace memtrack;
namespace fs = std::filesystem;

void put(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string fmt_hex(uint64_t value) {
  char text[20];
  std::snprintf(text, sizeof text, "%llx", static_cast<unsigned long long>(value));
  return text;
}

std::string as_string(const records::ByteBuffer& buffer) { return std::string(buffer.data(), buffer.size()); }

// FuzzedDataProvider::ConsumeRandomLengthString's encoding: a backslash
// followed by another byte ends the string, two backslashes are one.
std::string provider_string(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '\\' ? std::string("\\\\") : std::string(1, c);
  return out + "\\n";
}

std::vector<Event> events_of_every_kind(const std::string& elf_path, const std::vector<uint8_t>& build_id) {
  std::vector<Event> events;
  auto add = [&](EventType type, uint64_t timestamp) -> Event& {
    Event& e = events.emplace_back();
    e.type = type;
    e.pid = e.tid = 100;
    e.timestamp = timestamp;
    return e;
  };
  auto image = std::make_shared<ProcessImage>();
  image->path = "/usr/bin/app";
  image->comm = "app";
  image->argv = {"app", "--flag"};
  add(EventType::Exec, 1000).image = image;
  auto mapping = std::make_shared<MappingInfo>();
  mapping->len = 0x2000;
  mapping->file_offset = 0x1000;
  mapping->build_id = build_id;
  mapping->prot = 5;
  mapping->path = elf_path;
  mapping->new_image = true;
  Event& mapped = add(EventType::Mapping, 1100);
  mapped.addr = 0x7f0000001000;
  mapped.mapping = mapping;
  auto stack = std::make_shared<StackDefinition>();
  stack->hash = 0x1234567890abcdef;
  stack->chain = {0x7f0000001010, 0x7f0000001100};
  stack->end = StackEnd::Truncated;
  stack->sp = 0x7ffd0000;
  stack->regs = std::vector<uint64_t>(17, 0x7ffd0010);
  stack->bytes = std::vector<uint8_t>(64, 0x11);
  stack->truncated = true;
  stack->fp_chain = {0x7f0000001020};
  add(EventType::Stack, 1200).stack = stack;
  Event& malloc = add(EventType::Malloc, 1300);
  malloc.addr = 0x5000;
  malloc.size = 48;
  malloc.stack_hash = stack->hash;
  Event& calloc = add(EventType::Calloc, 1310);
  calloc.addr = 0x6000;
  calloc.size = 16;
  Event& aligned = add(EventType::AlignedAlloc, 1320);
  aligned.addr = 0x8000;
  aligned.size = 4096;
  Event& realloc = add(EventType::Realloc, 1400);
  realloc.addr = 0x7000;
  realloc.old_addr = 0x5000;
  realloc.size = 96;
  add(EventType::Free, 1500).addr = 0x6000;
  add(EventType::Fork, 1600).parent_pid = 100;
  events.back().pid = events.back().tid = 101;
  add(EventType::Exit, 1700).pid = 101;
  events.back().tid = 101;
  add(EventType::Exit, 1800);
  return events;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR ELF_FILE\n", argv[0]);
    return 2;
  }
  const fs::path out = argv[1];
  const std::string elf_path = fs::absolute(argv[2]).string();
  ElfModule elf = read_elf_module(elf_path);

  ArtifactHeader header;
  header.features = {"alloc-events", "process-tree", "stacks"};
  header.recorder_version = "seed";
  header.command = {"app", "--flag"};
  header.host = "host";
  header.kernel = "6.1";
  header.start_monotonic_ns = 900;
  header.start_realtime_ns = 1700000000000000000;
  header.page_size = 4096;
  const std::vector<Event> events = events_of_every_kind(elf_path, elf.build_id);
  ArtifactTrailer trailer;
  trailer.counters = {{"kernel_events_lost", 0}, {"producer_pauses", 2}};
  trailer.end_monotonic_ns = 2000;

  fs::create_directories(out / "artifact");
  for (auto [name, layout] : {std::pair{"full.zst", ArtifactLayout::Records}, std::pair{"compact.zst", ArtifactLayout::Compact}}) {
    WriterOptions options;
    options.layout = layout;
    options.frame_events = 5;  // several frames
    ArtifactWriter writer((out / "artifact" / name).string(), header, options);
    writer.append(events);
    auto module = std::make_shared<ModuleInfo>();
    module->path = elf_path;
    module->build_id = elf.build_id;
    module->load_segments = elf.load_segments;
    module->symbols = {elf.symbols.begin(), elf.symbols.begin() + std::min<size_t>(elf.symbols.size(), 3)};
    module->eh_frame_hdr = elf.eh_frame_hdr;
    module->debug_link = DebugLink{"app.debug", 0x1234};
    writer.append_module(module);
    writer.finish(trailer);
  }
  {
    // record --aggregate's: the other records and the Aggregate record.
    WriterOptions options;
    options.layout = ArtifactLayout::Compact;
    options.frame_events = 5;
    options.aggregator = std::make_shared<HeapAggregator>(header.start_monotonic_ns, false);
    ArtifactWriter writer((out / "artifact" / "aggregated.zst").string(), header, options);
    writer.append(events);
    writer.finish(trailer);
  }
  {
    // Not finalized: the writer never finished (a killed recorder).
    std::string full;
    std::ifstream in(out / "artifact" / "full.zst", std::ios::binary);
    full.assign(std::istreambuf_iterator<char>(in), {});
    put(out / "artifact" / "cut.zst", full.substr(0, full.size() * 2 / 3));
  }

  records::ByteBuffer buffer;
  records::pack_events(events, buffer);
  put(out / "msgpack" / "events.bin", as_string(buffer));
  // Header and trailer payloads, without the skippable-frame envelope.
  buffer.clear();
  records::append_header_frame(header, buffer);
  put(out / "msgpack" / "header.bin", as_string(buffer).substr(records::kSkippableHeaderBytes));
  buffer.clear();
  records::append_trailer_frame(trailer, buffer);
  put(out / "msgpack" / "trailer.bin", as_string(buffer).substr(records::kSkippableHeaderBytes));

  // module_artifacts_fuzzer's input: m.symbols.map, m.eh_frame,
  // m.eh_frame_hdr, then memtrack.metadata (docs/MODULES.md).
  std::string symbols;
  for (const FunctionSymbol& s : elf.symbols) symbols += fmt_hex(s.address) + " " + fmt_hex(s.size) + " " + s.name + "\n";
  const auto bytes_of = [](const std::optional<SectionBytes>& s) {
    return s ? std::string(s->bytes.begin(), s->bytes.end()) : std::string();
  };
  nlohmann::ordered_json segments = nlohmann::ordered_json::array();
  for (const LoadSegment& s : elf.load_segments)
    segments.push_back({{"vaddr", s.vaddr}, {"offset", s.offset}, {"filesz", s.filesz}, {"memsz", s.memsz}, {"flags", s.flags}});
  auto section = [&](const std::optional<SectionBytes>& s, const char* file) -> nlohmann::ordered_json {
    if (!s) return nullptr;
    return {{"file", file}, {"address", s->address}, {"size", s->bytes.size()}};
  };
  nlohmann::ordered_json entry = {{"path", elf_path},
                                  {"status", "exported"},
                                  {"reason", nullptr},
                                  {"identity", "build-id"},
                                  {"build_id", "0123456789abcdef"},
                                  {"dev", nullptr},
                                  {"ino", nullptr},
                                  {"load_segments", segments},
                                  {"eh_frame", section(elf.eh_frame, "m.eh_frame")},
                                  {"eh_frame_hdr", section(elf.eh_frame_hdr, "m.eh_frame_hdr")},
                                  {"debug_frame", nullptr},
                                  {"debug_link", nullptr},
                                  {"debug_file", nullptr},
                                  {"symbols_file", "m.symbols.map"},
                                  {"symbols", elf.symbols.size()},
                                  {"missing", nlohmann::ordered_json::array()}};
  nlohmann::ordered_json metadata = {{"version", 1},
                                     {"artifact", "a.zst"},
                                     {"start_monotonic_ns", 900},
                                     {"files", {{"m", entry}}},
                                     {"processes", nlohmann::ordered_json::object()}};
  put(out / "module_artifacts" / "export.bin", provider_string(symbols) + provider_string(bytes_of(elf.eh_frame)) +
                                                   provider_string(bytes_of(elf.eh_frame_hdr)) + metadata.dump(1));

  // suppressions_fuzzer's input: a pattern, a name, then a file.
  put(out / "suppressions" / "lsan.bin", provider_string("^std::*alloc$") + provider_string("std::allocator") +
                                             "# LSan\nleak:libfoo.so\n  leak: ^bar*baz$ \r\n\nleak:*\n");
  return 0;
}
