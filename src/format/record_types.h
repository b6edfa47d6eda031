// The artifact's record types, described once: every key with the type of
// its value (kKeys), and for every record type the keys it writes, in order,
// where each value lives in memory and when it is written (kEventTypes,
// kModuleType). The engine drives from these tables the writer (entry count
// and entries) and the size bound (record_pack.cpp), and the reader (key
// dispatch, then the record's assembly; record_decode.cpp), the way the
// allocator catalogue (record/probes/allocator_symbols.cpp) drives the probes.
//
// Adding a record type: its keys to Draft and kKeys (a key read by several
// types has one value type), a RecordType to kEventTypes in EventType order,
// the name in format/event.h, and docs/FORMAT.md. Internal to src/format.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "format/event.h"
#include "format/fix_str.h"
#include "format/module_info.h"

namespace memtrack::records {

// Every key's value as read, before the record's type is known (`type` may
// come anywhere in the map). A member's type is its key's value type (see
// record_decode.cpp's read_value); its default is the value of an absent key.
struct Draft {
  std::string_view type;
  int32_t pid = 0, tid = 0, parent_pid = 0, exit_code = 0;
  uint64_t timestamp = 0, addr = 0, size = 0, old_addr = 0, stack_hash = 0;
  int64_t member = 0;  // wider than Rss's: a value out of its range is no error
  uint64_t old_size = 0;
  std::string_view path, comm;
  std::vector<std::string> argv;
  uint64_t dev = 0, ino = 0, file_offset = 0, len = 0;
  std::span<const uint8_t> build_id;
  uint32_t prot = 0;
  bool new_image = false;
  uint64_t hash = 0, miss_pc = 0, sp = 0;
  std::vector<uint64_t> chain, regs, fp_chain;
  std::optional<std::string_view> end;
  std::span<const uint8_t> bytes;
  bool truncated = false;
  std::vector<LoadSegment> segments;
  std::vector<uint64_t> symbol_addresses, symbol_sizes;
  std::vector<std::string> symbol_names;
  std::optional<std::span<const uint8_t>> eh_frame, eh_frame_hdr, debug_frame;
  uint64_t eh_frame_address = 0, eh_frame_hdr_address = 0;
  std::optional<std::string_view> debug_link;
  uint32_t debug_link_crc = 0;
  std::string_view debug_file;
  // A Heap record's (format/heap_runs.h).
  uint64_t first_block = 0, first_tick = 0, tick_ns = 0;
  std::span<const uint8_t> new_threads, new_sites, kinds, ticks, threads, sites, refs, addresses;
  std::vector<uint64_t> python_frames;
  uint64_t code_id = 0;
  std::string_view name, qualname, filename;
  uint32_t first_line = 0;
  std::span<const uint8_t> line_table;
  bool line_table_cut = false;
  // An Aggregate record's (docs/FORMAT.md §2.9).
  uint32_t part = 0, parts = 0;
  std::span<const uint8_t> state;
};

template <auto Member>
struct Key;
// A key: its name, and the Draft member its value is read into.
template <typename Value, Value Draft::*Member>
struct Key<Member> {
  using Type = Value;
  FixStr name;
  static Value& in(Draft& draft) { return draft.*Member; }
};
template <auto Member>
constexpr Key<Member> key(std::string_view name) {
  return {FixStr(name)};
}

// Event keys (seed-compatible names).
inline constexpr auto kPid = key<&Draft::pid>("pid");
inline constexpr auto kTid = key<&Draft::tid>("tid");
inline constexpr auto kTimestamp = key<&Draft::timestamp>("timestamp");
inline constexpr auto kAddr = key<&Draft::addr>("addr");
inline constexpr auto kType = key<&Draft::type>("type");
inline constexpr auto kSize = key<&Draft::size>("size");
inline constexpr auto kOldAddr = key<&Draft::old_addr>("old_addr");
inline constexpr auto kStackHash = key<&Draft::stack_hash>("stack_hash");
inline constexpr auto kParentPid = key<&Draft::parent_pid>("parent_pid");
inline constexpr auto kExitCode = key<&Draft::exit_code>("exit_code");
inline constexpr auto kPath = key<&Draft::path>("path");
inline constexpr auto kComm = key<&Draft::comm>("comm");
inline constexpr auto kArgv = key<&Draft::argv>("argv");
inline constexpr auto kDev = key<&Draft::dev>("dev");
inline constexpr auto kIno = key<&Draft::ino>("ino");
inline constexpr auto kFileOffset = key<&Draft::file_offset>("file_offset");
inline constexpr auto kLen = key<&Draft::len>("len");
inline constexpr auto kBuildId = key<&Draft::build_id>("build_id");
inline constexpr auto kProt = key<&Draft::prot>("prot");
inline constexpr auto kNewImage = key<&Draft::new_image>("new_image");
inline constexpr auto kHash = key<&Draft::hash>("hash");
inline constexpr auto kChain = key<&Draft::chain>("chain");
inline constexpr auto kEnd = key<&Draft::end>("end");
inline constexpr auto kMissPc = key<&Draft::miss_pc>("miss_pc");
inline constexpr auto kSp = key<&Draft::sp>("sp");
inline constexpr auto kRegs = key<&Draft::regs>("regs");
inline constexpr auto kBytes = key<&Draft::bytes>("bytes");
inline constexpr auto kTruncated = key<&Draft::truncated>("truncated");
inline constexpr auto kFpChain = key<&Draft::fp_chain>("fp_chain");
inline constexpr auto kMember = key<&Draft::member>("member");
inline constexpr auto kOldSize = key<&Draft::old_size>("old_size");
inline constexpr auto kPythonFrames = key<&Draft::python_frames>("python_frames");
inline constexpr auto kCodeId = key<&Draft::code_id>("code_id");
inline constexpr auto kName = key<&Draft::name>("name");
inline constexpr auto kQualname = key<&Draft::qualname>("qualname");
inline constexpr auto kFilename = key<&Draft::filename>("filename");
inline constexpr auto kFirstLine = key<&Draft::first_line>("first_line");
inline constexpr auto kLineTable = key<&Draft::line_table>("line_table");
inline constexpr auto kLineTableCut = key<&Draft::line_table_cut>("line_table_cut");
// Module keys: none shares a name with an event key of another type, so
// older readers skip Module records without error.
inline constexpr auto kSegments = key<&Draft::segments>("segments");
inline constexpr auto kSymbolAddresses = key<&Draft::symbol_addresses>("symbol_addresses");
inline constexpr auto kSymbolSizes = key<&Draft::symbol_sizes>("symbol_sizes");
inline constexpr auto kSymbolNames = key<&Draft::symbol_names>("symbol_names");
inline constexpr auto kEhFrame = key<&Draft::eh_frame>("eh_frame");
inline constexpr auto kEhFrameAddress = key<&Draft::eh_frame_address>("eh_frame_address");
inline constexpr auto kEhFrameHdr = key<&Draft::eh_frame_hdr>("eh_frame_hdr");
inline constexpr auto kEhFrameHdrAddress = key<&Draft::eh_frame_hdr_address>("eh_frame_hdr_address");
inline constexpr auto kDebugFrame = key<&Draft::debug_frame>("debug_frame");
inline constexpr auto kDebugLink = key<&Draft::debug_link>("debug_link");
inline constexpr auto kDebugLinkCrc = key<&Draft::debug_link_crc>("debug_link_crc");
inline constexpr auto kDebugFile = key<&Draft::debug_file>("debug_file");
// Heap keys (format/heap_runs.h): written by HeapRunEncoder, read into HeapColumns.
inline constexpr auto kFirstBlock = key<&Draft::first_block>("first_block");
inline constexpr auto kFirstTick = key<&Draft::first_tick>("first_tick");
inline constexpr auto kTickNs = key<&Draft::tick_ns>("tick_ns");
inline constexpr auto kNewThreads = key<&Draft::new_threads>("new_threads");
inline constexpr auto kNewSites = key<&Draft::new_sites>("new_sites");
inline constexpr auto kKinds = key<&Draft::kinds>("kinds");
inline constexpr auto kTicks = key<&Draft::ticks>("ticks");
inline constexpr auto kThreads = key<&Draft::threads>("threads");
inline constexpr auto kSites = key<&Draft::sites>("sites");
inline constexpr auto kRefs = key<&Draft::refs>("refs");
inline constexpr auto kAddresses = key<&Draft::addresses>("addresses");
inline constexpr FixStr kHeapName("Heap");
// Aggregate keys: written by pack_aggregate_part, read into AggregatePart.
inline constexpr auto kPart = key<&Draft::part>("part");
inline constexpr auto kParts = key<&Draft::parts>("parts");
inline constexpr auto kState = key<&Draft::state>("state");
inline constexpr FixStr kAggregateName("Aggregate");

// The keys the reader knows; a key missing here is skipped as unknown.
inline constexpr auto kKeys =
    std::tuple(kPid, kTid, kTimestamp, kAddr, kType, kSize, kOldAddr, kStackHash, kParentPid, kExitCode, kPath,
               kComm, kArgv, kDev, kIno, kFileOffset, kLen, kBuildId, kProt, kNewImage, kHash, kChain, kEnd,
               kMissPc, kSp, kRegs, kBytes, kTruncated, kFpChain, kMember, kOldSize, kSegments, kSymbolAddresses, kSymbolSizes,
               kSymbolNames, kEhFrame, kEhFrameAddress, kEhFrameHdr, kEhFrameHdrAddress, kDebugFrame, kDebugLink,
               kDebugLinkCrc, kDebugFile, kFirstBlock, kFirstTick, kTickNs, kNewThreads, kNewSites, kKinds, kTicks,
               kThreads, kSites, kRefs, kAddresses, kPythonFrames, kCodeId, kName, kQualname, kFilename, kFirstLine,
               kLineTable, kLineTableCut, kPart, kParts, kState);

struct DecodeNotes;  // records.h
// Defined in record_decode.cpp: a Stack record's `end`, which an older record
// lacks and a newer one may name beyond this reader's reasons.
void read_stack_end(StackDefinition& stack, Draft& draft, DecodeNotes& notes);

// One key of a record type. `get` gives the value to write from the
// record's part (the Event, or what it points to), `when` says whether it is
// written, `put` sets the part from the Draft once the map is read.
template <typename K, typename Get, typename When, typename Put>
struct Field {
  K key;
  Get get;
  When when;
  Put put;
};
// Spelled out for clang 14, which does not deduce an aggregate's arguments
// (the fuzz build uses it).
template <typename K, typename Get, typename When, typename Put>
Field(K, Get, When, Put) -> Field<K, Get, When, Put>;

struct Always {
  constexpr bool operator()(const auto&) const { return true; }
};

// Moves a Draft value into the record's member.
template <typename To, typename From>
void assign(To& to, From& from) {
  if constexpr (std::is_same_v<To, std::vector<uint8_t>>)
    to.assign(from.begin(), from.end());
  else if constexpr (std::is_same_v<To, std::string>)
    to = std::string(from);
  else
    to = std::move(from);
}

// A key held by a member of the part and always written.
template <typename K, typename Part, typename T>
constexpr auto member(K key, T Part::*m) {
  return Field{key, [m](const Part& part) -> const T& { return part.*m; }, Always{},
               [m](Part& part, Draft& draft, DecodeNotes&) { assign(part.*m, K::in(draft)); }};
}
// The same, written only when it differs from the default (0, false, empty):
// absent means the default, so records stay as small as the seed's.
template <typename K, typename Part, typename T>
constexpr auto unless_default(K key, T Part::*m) {
  auto field = member(key, m);
  return Field{key, field.get,
               [m](const Part& part) {
                 if constexpr (requires { (part.*m).empty(); })
                   return !(part.*m).empty();
                 else
                   return part.*m != T{};
               },
               field.put};
}
// A key whose value the writer computes; the reader's assembly reads it
// from the Draft in another key's `put`.
template <typename K, typename Get, typename When = Always>
constexpr auto computed(K key, Get get, When when = {}) {
  return Field{key, get, when, [](auto&, Draft&, DecodeNotes&) {}};
}
// A field written only when `also` holds too.
template <typename Also, typename K, typename Get, typename When, typename Put>
constexpr auto written_when(Also also, Field<K, Get, When, Put> field) {
  return Field{field.key, field.get, [also, when = field.when](const auto& part) { return also(part) && when(part); },
               field.put};
}
// A Module section: its bytes when present, and its load address from the
// Draft member `address` (none for sections that are not loaded).
template <typename K>
constexpr auto section(K key, std::optional<SectionBytes> ModuleInfo::*m, uint64_t Draft::*address) {
  return Field{key, [m](const ModuleInfo& module) -> const std::vector<uint8_t>& { return (module.*m)->bytes; },
               [m](const ModuleInfo& module) { return (module.*m).has_value(); },
               [m, address](ModuleInfo& module, Draft& draft, DecodeNotes&) {
                 const auto& bytes = K::in(draft);
                 if (!bytes) return;
                 SectionBytes& section = (module.*m).emplace();
                 section.bytes.assign(bytes->begin(), bytes->end());
                 if (address) section.address = draft.*address;
               }};
}

// Values the writer computes rather than finds in a member.
struct TypeName {  // the record's `type`
  EventType type;
};
struct ModuleTypeName {};  // "Module"
struct StackEndName {
  StackEnd end;
};
// Module symbols are written as three columns rather than one array per
// symbol: each column is uniform, which zstd compresses better, and the
// addresses, sorted, are written as differences from the previous one (1-3
// bytes instead of 5).
struct SymbolAddressSteps {
  const std::vector<FunctionSymbol>* symbols;
};
struct SymbolSizes {
  const std::vector<FunctionSymbol>* symbols;
};
struct SymbolNames {
  const std::vector<FunctionSymbol>* symbols;
};
// Defined in record_decode.cpp: the Module symbols from the three columns; throws
// DecodeError when their lengths differ.
void assemble_symbols(ModuleInfo& module, Draft& draft);

// The keys every event record starts with.
inline constexpr auto kEventHead =
    std::tuple(member(kPid, &Event::pid), member(kTid, &Event::tid), member(kTimestamp, &Event::timestamp),
               member(kAddr, &Event::addr), computed(kType, [](const Event& e) { return TypeName{e.type}; }));

// A record type: the keys after the head, on the part of the event that
// holds them (the Event itself, or the ProcessImage, MappingInfo or
// StackDefinition it points to).
template <typename Part, typename Fields>
struct RecordType {
  using PartType = Part;
  Fields fields;
};
template <typename Part, typename... F>
constexpr auto record_type(F... fields) {
  return RecordType<Part, std::tuple<F...>>{std::tuple(fields...)};
}

// stack_hash is omitted when 0 (no stack captured), as the seed does:
// records without a stack are byte-identical to those of a writer that
// predates stacks.
inline constexpr auto kAllocation =
    record_type<Event>(member(kSize, &Event::size), unless_default(kStackHash, &Event::stack_hash));

// The raw copy's keys (sp, regs, bytes, truncated) go together: written only
// when there are bytes to unwind from.
inline constexpr auto kWithRawCopy = [](const StackDefinition& stack) { return !stack.bytes.empty(); };

// Rss's `member`: written as the Event's int32; a value this reader cannot
// hold reads as an unknown member (-1), not as an error.
inline constexpr auto kRssMember =
    Field{kMember, [](const Event& e) -> const int32_t& { return e.member; }, Always{},
          [](Event& e, Draft& d, DecodeNotes&) {
            e.member = d.member >= 0 && d.member <= std::numeric_limits<int32_t>::max() ? static_cast<int32_t>(d.member)
                                                                                        : -1;
          }};
// Mmap and Munmap: [addr, addr + size).
inline constexpr auto kMappedRange = record_type<Event>(member(kSize, &Event::size));

// In EventType order.
inline constexpr auto kEventTypes = std::tuple(
    kAllocation,  // Malloc
    kAllocation,  // Calloc
    // Realloc: old_addr is omitted for realloc(NULL, n), as the seed does,
    // so those records stay byte-identical to its older Realloc.
    record_type<Event>(unless_default(kOldAddr, &Event::old_addr), member(kSize, &Event::size),
                       unless_default(kStackHash, &Event::stack_hash)),
    kAllocation,          // AlignedAlloc
    record_type<Event>(),  // Free
    record_type<Event>(member(kParentPid, &Event::parent_pid)),  // Fork
    record_type<ProcessImage>(unless_default(kPath, &ProcessImage::path),
                              unless_default(kComm, &ProcessImage::comm),
                              unless_default(kArgv, &ProcessImage::argv)),  // Exec
    record_type<Event>(member(kExitCode, &Event::exit_code)),               // Exit
    // Mapping: the seed's keys first, always present (its reader expects them).
    record_type<MappingInfo>(member(kPath, &MappingInfo::path), member(kDev, &MappingInfo::dev),
                             member(kIno, &MappingInfo::ino), member(kFileOffset, &MappingInfo::file_offset),
                             member(kLen, &MappingInfo::len), unless_default(kBuildId, &MappingInfo::build_id),
                             member(kProt, &MappingInfo::prot), unless_default(kNewImage, &MappingInfo::new_image)),
    record_type<StackDefinition>(
        member(kHash, &StackDefinition::hash), unless_default(kChain, &StackDefinition::chain),
        Field{kEnd, [](const StackDefinition& s) { return StackEndName{s.end}; }, Always{},
              [](StackDefinition& s, Draft& d, DecodeNotes& notes) { read_stack_end(s, d, notes); }},
        unless_default(kMissPc, &StackDefinition::miss_pc),
        // The seed's keys and types.
        written_when(kWithRawCopy, member(kSp, &StackDefinition::sp)),
        written_when(kWithRawCopy, member(kRegs, &StackDefinition::regs)),
        written_when(kWithRawCopy, member(kBytes, &StackDefinition::bytes)),
        written_when(kWithRawCopy, member(kTruncated, &StackDefinition::truncated)),
        written_when(kWithRawCopy, unless_default(kFpChain, &StackDefinition::fp_chain)),
        unless_default(kPythonFrames, &StackDefinition::python_frames)),  // Stack
    // Memory over time (docs/FORMAT.md §2.5). Rss: the seed's keys.
    record_type<Event>(kRssMember, member(kSize, &Event::size)),  // Rss
    kMappedRange,                                                 // Mmap
    kMappedRange,                                                 // Munmap
    record_type<Event>(member(kOldAddr, &Event::old_addr), member(kOldSize, &Event::old_size),
                       member(kSize, &Event::size)),       // Mremap
    record_type<Event>(member(kOldAddr, &Event::old_addr)),  // Brk
    record_type<Event>(),                                    // Interposed
    record_type<Event>(kRssMember, member(kSize, &Event::size)),  // OwnMemory
    record_type<PythonCode>(member(kCodeId, &PythonCode::id), member(kName, &PythonCode::name),
                            member(kQualname, &PythonCode::qualname), member(kFilename, &PythonCode::filename),
                            member(kFirstLine, &PythonCode::first_line), member(kLineTable, &PythonCode::line_table),
                            unless_default(kLineTableCut, &PythonCode::line_table_cut)));  // PythonCode
static_assert(std::tuple_size_v<decltype(kEventTypes)> == kEventTypeCount);

// A module's identity is its build id, or (dev, ino) when either is set.
inline constexpr auto kByInode = [](const ModuleInfo& m) { return m.dev != 0 || m.ino != 0; };

// Written by export-modules and --embed-modules (docs/MODULES.md).
inline constexpr auto kModuleType = record_type<ModuleInfo>(
    computed(kType, [](const ModuleInfo&) { return ModuleTypeName{}; }), member(kPath, &ModuleInfo::path),
    unless_default(kBuildId, &ModuleInfo::build_id), written_when(kByInode, member(kDev, &ModuleInfo::dev)),
    written_when(kByInode, member(kIno, &ModuleInfo::ino)), member(kSegments, &ModuleInfo::load_segments),
    Field{kSymbolAddresses, [](const ModuleInfo& m) { return SymbolAddressSteps{&m.symbols}; }, Always{},
          [](ModuleInfo& m, Draft& d, DecodeNotes&) { assemble_symbols(m, d); }},
    computed(kSymbolSizes, [](const ModuleInfo& m) { return SymbolSizes{&m.symbols}; }),
    computed(kSymbolNames, [](const ModuleInfo& m) { return SymbolNames{&m.symbols}; }),
    section(kEhFrame, &ModuleInfo::eh_frame, &Draft::eh_frame_address),
    computed(kEhFrameAddress, [](const ModuleInfo& m) { return m.eh_frame->address; },
             [](const ModuleInfo& m) { return m.eh_frame.has_value(); }),
    section(kEhFrameHdr, &ModuleInfo::eh_frame_hdr, &Draft::eh_frame_hdr_address),
    computed(kEhFrameHdrAddress, [](const ModuleInfo& m) { return m.eh_frame_hdr->address; },
             [](const ModuleInfo& m) { return m.eh_frame_hdr.has_value(); }),
    section(kDebugFrame, &ModuleInfo::debug_frame, nullptr),  // not loaded: no address
    Field{kDebugLink, [](const ModuleInfo& m) -> const std::string& { return m.debug_link->name; },
          [](const ModuleInfo& m) { return m.debug_link.has_value(); },
          [](ModuleInfo& m, Draft& d, DecodeNotes&) {
            if (d.debug_link) m.debug_link = DebugLink{std::string(*d.debug_link), d.debug_link_crc};
          }},
    computed(kDebugLinkCrc, [](const ModuleInfo& m) { return m.debug_link->crc; },
             [](const ModuleInfo& m) { return m.debug_link.has_value(); }),
    unless_default(kDebugFile, &ModuleInfo::debug_file));

}  // namespace memtrack::records
