#include "cli/info.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <iostream>
#include <nlohmann/json.hpp>
#include <span>

#include "cli/exit_status.h"
#include "format/artifact.h"
#include "util/hex.h"

namespace memtrack {

namespace {
// Commands, paths and names come from the recorded system: not always UTF-8.
constexpr auto kReplaceInvalidUtf8 = nlohmann::json::error_handler_t::replace;
}  // namespace

namespace {

// Stack hashes are identifiers spread over all 64 bits: as JSON numbers they
// would lose their low bits in tools that read numbers as doubles (jq 1.6,
// JavaScript), and a Stack record could no longer be matched with the
// allocations that refer to it.
std::string hash_text(uint64_t hash) { return fmt::format("{:#018x}", hash); }

// How much of a Stack record's copied bytes `dump` shows: the first 8 stack
// words, enough to recognise it; the whole copy (up to 32 KiB) would drown
// the output.
constexpr size_t kDumpedStackBytes = 64;

}  // namespace

int run_info(const std::string& path, const std::string& format, std::ostream& out) {
  std::array<uint64_t, kEventTypeCount> by_type{};
  uint64_t allocations_with_stack = 0;
  ReadResult r = read_artifact(path, [&](const Event& e) {
    ++by_type[static_cast<size_t>(e.type)];
    allocations_with_stack += is_allocation(e.type) && e.stack_hash != 0;
  });
  const int status = r.error || !r.warnings.empty() ? exit_status::kDamagedInput : exit_status::kOk;

  nlohmann::ordered_json j;
  j["file"] = path;
  j["format_version"] = r.header.format_version;
  j["recorder_version"] = r.header.recorder_version;
  j["features"] = r.header.features;
  j["command"] = r.header.command;
  j["host"] = r.header.host;
  j["kernel"] = r.header.kernel;
  j["clock"] = r.header.clock;
  j["start_monotonic_ns"] = r.header.start_monotonic_ns;
  j["start_realtime_ns"] = r.header.start_realtime_ns;
  j["page_size"] = r.header.page_size;
  j["kernel_fallbacks"] = r.header.kernel_fallbacks;
  j["frames"] = r.stats.frames;
  j["events"] = r.stats.events;
  j["modules"] = r.stats.modules;  // Module records (--embed-modules); the trailer counts them with the events
  j["aggregate_parts"] = r.stats.aggregate_parts;  // record --aggregate's figures; counted likewise
  nlohmann::ordered_json types = nlohmann::ordered_json::object();
  for (size_t i = 0; i < by_type.size(); ++i)
    types[std::string(event_type_name(static_cast<EventType>(i)))] = by_type[i];
  j["events_by_type"] = types;
  j["stack_definitions"] = by_type[static_cast<size_t>(EventType::Stack)];
  j["allocations_with_stack"] = allocations_with_stack;
  j["skipped_records"] = r.stats.skipped_records;
  j["skipped_frames"] = r.stats.skipped_frames;
  // Damage the reader skipped or noticed (docs/FORMAT.md §4); any of it makes `intact` false.
  j["damaged_frames"] = r.stats.damaged_frames;
  j["damaged_bytes"] = r.stats.damaged_bytes;
  j["duplicate_frames"] = r.stats.duplicate_frames;
  j["missing_frames"] = r.stats.missing_frames;
  j["finalized"] = r.trailer.has_value();
  if (r.trailer && r.trailer->counters.contains("probe_floor_ns")) j["probe_floor_ns"] = r.trailer->counters.at("probe_floor_ns");
  if (r.trailer) {
    j["counters"] = r.trailer->counters;
    j["exit_status"] = r.trailer->exit_status;
    j["trailer_events"] = r.trailer->events;
    j["trailer_frames"] = r.trailer->frames;
  }
  j["warnings"] = r.warnings;
  j["error"] = r.error ? nlohmann::json(*r.error) : nlohmann::json(nullptr);
  j["intact"] = status == 0;

  if (format == "json") {
    out << j.dump(2, ' ', false, kReplaceInvalidUtf8) << "\n";
    return status;
  }
  for (const auto& [key, value] : j.items()) {
    if (key == "counters" || key == "events_by_type") {
      out << key << ":\n";
      for (const auto& [name, v] : value.items()) out << "  " << name << ": " << v.dump(-1, ' ', false, kReplaceInvalidUtf8) << "\n";
    } else {
      out << key << ": " << (value.is_string() ? value.get<std::string>() : value.dump(-1, ' ', false, kReplaceInvalidUtf8)) << "\n";
    }
  }
  return status;
}

int run_dump(const std::string& path, std::ostream& out) {
  ReadResult r = read_artifact(path, [&](const Event& e) {
    nlohmann::ordered_json j;
    j["type"] = event_type_name(e.type);
    j["timestamp"] = e.timestamp;
    j["pid"] = e.pid;
    j["tid"] = e.tid;
    // The compact layout names blocks by number (docs/FORMAT.md §2.7).
    auto block = [&](const char* address_key, const char* block_key, uint64_t address) {
      if (address & kBlockKeyBit && address < (kBlockKeyBit | kBlockKeyBit >> 1))
        j[block_key] = address & ~kBlockKeyBit;
      else
        j[address_key] = address;
    };
    switch (e.type) {
      case EventType::Malloc:
      case EventType::Calloc:
      case EventType::AlignedAlloc:
        block("addr", "block", e.addr);
        j["size"] = e.size;
        break;
      case EventType::Realloc:
        block("addr", "block", e.addr);
        j["size"] = e.size;
        block("old_addr", "old_block", e.old_addr);
        break;
      case EventType::Free:
        block("addr", "block", e.addr);
        break;
      case EventType::Fork:
        j["parent_pid"] = e.parent_pid;
        break;
      case EventType::Exec:
        if (e.image) {
          j["path"] = e.image->path;
          j["comm"] = e.image->comm;
          j["argv"] = e.image->argv;
        }
        break;
      case EventType::Exit:
        j["exit_code"] = e.exit_code;
        break;
      case EventType::Mapping:
        j["addr"] = e.addr;
        if (e.mapping) {
          j["len"] = e.mapping->len;
          j["file_offset"] = e.mapping->file_offset;
          j["dev"] = e.mapping->dev;
          j["ino"] = e.mapping->ino;
          j["build_id"] = hex(e.mapping->build_id);
          j["prot"] = e.mapping->prot;
          j["path"] = e.mapping->path;
          j["new_image"] = e.mapping->new_image;
        }
        break;
      case EventType::Rss:
      case EventType::OwnMemory:
        j["member"] = e.member;
        j["size"] = e.size;
        break;
      case EventType::Mremap:
        j["old_addr"] = e.old_addr;
        j["old_size"] = e.old_size;
        [[fallthrough]];
      case EventType::Mmap:
      case EventType::Munmap:
        j["addr"] = e.addr;
        j["size"] = e.size;
        break;
      case EventType::Brk:
        j["addr"] = e.addr;
        j["old_addr"] = e.old_addr;
        break;
      case EventType::Stack:
        if (e.stack) {
          const StackDefinition& stack = *e.stack;
          j["hash"] = hash_text(stack.hash);
          j["end"] = stack_end_name(stack.end);
          j["chain"] = stack.chain;
          j["miss_pc"] = stack.miss_pc;
          j["sp"] = stack.sp;
          j["regs"] = stack.regs;
          j["bytes_len"] = stack.bytes.size();
          j["bytes_head"] = hex(std::span(stack.bytes).first(
              std::min(stack.bytes.size(), kDumpedStackBytes)));
          j["truncated"] = stack.truncated;
          if (!stack.fp_chain.empty()) j["fp_chain"] = stack.fp_chain;
          if (!stack.python_frames.empty()) j["python_frames"] = stack.python_frames;
        }
        break;
      case EventType::PythonCode:
        if (e.python_code) {
          const PythonCode& code = *e.python_code;
          j["code_id"] = hash_text(code.id);
          j["name"] = code.name;
          j["qualname"] = code.qualname;
          j["filename"] = code.filename;
          j["first_line"] = code.first_line;
          j["line_table"] = hex(code.line_table);
          j["line_table_cut"] = code.line_table_cut;
        }
        break;
      case EventType::Interposed:
        break;  // the common fields say it all
    }
    // Like the artifact, only allocations that have a stack say so.
    if (is_allocation(e.type) && e.stack_hash != 0) j["stack_hash"] = hash_text(e.stack_hash);
    out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }, {}, [&](const AggregatePart& part) {
    // record --aggregate's figures: their size, not their bytes.
    nlohmann::ordered_json j;
    j["type"] = "Aggregate";
    j["part"] = part.part;
    j["parts"] = part.parts;
    j["state_bytes"] = part.state.size();
    out << j.dump() << "\n";
  });
  for (const auto& w : r.warnings) std::cerr << "memtrack: warning: " << w << "\n";
  if (r.error) std::cerr << "memtrack: " << *r.error << "\n";
  return r.error || !r.warnings.empty() ? exit_status::kDamagedInput : exit_status::kOk;
}

}  // namespace memtrack
