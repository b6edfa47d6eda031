// The in-memory form of one artifact record, shared by the recorder, the
// artifact writer/reader and the analysis. Field names follow the seed
// system's event stream (CodSpeed's memtrack, which memtrack started from;
// see docs/FORMAT.md).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace memtrack {

enum class EventType : uint8_t {
  Malloc,
  Calloc,
  Realloc,
  AlignedAlloc,
  Free,
  Fork,
  Exec,
  Exit,
  Mapping,
  Stack,
  // Memory over time (docs/FORMAT.md §2.5).
  Rss,     // a process's RSS counter `member` is now `size` bytes
  Mmap,    // anonymous mapping made outside the allocators: [addr, addr + size)
  Munmap,  // unmapping made outside the allocators: [addr, addr + size)
  Mremap,  // [old_addr, old_addr + old_size) moved or resized to [addr, addr + size)
  Brk,     // the program break moved from old_addr to addr outside the allocators
  // From here on until its exec or exit, the process's allocator calls are
  // recorded by the interposer (the fast path) instead of uprobes; a forked
  // child inherits its parent's (docs/FORMAT.md §2.6).
  Interposed,
  // memtrack's own memory in the process (its interposer's events, call
  // paths and caches), counted apart from the program's: RSS counter
  // `member` (or kOwnMappedMember: its anonymous mappings) is now `size`
  // bytes (docs/FORMAT.md §2.5).
  OwnMemory,
  // A Python code object a Stack record's python_frames name, defined once
  // per process (docs/FORMAT.md §2.8).
  PythonCode,
};

inline constexpr int kEventTypeCount = 18;

inline bool is_memory_record(EventType t) {
  return t == EventType::Rss || t == EventType::Mmap || t == EventType::Munmap || t == EventType::Mremap ||
         t == EventType::Brk || t == EventType::OwnMemory;
}

// The kernel's RSS counters, as Rss records' `member` numbers them.
enum class RssMember : int32_t { File = 0, Anon = 1, Swap = 2, Shmem = 3 };
inline constexpr int kRssMemberCount = 4;
// OwnMemory's `member` beyond the RSS counters: memtrack's anonymous mappings.
inline constexpr int32_t kOwnMappedMember = 4;
// "file", "anon", "swap", "shmem".
std::string_view rss_member_name(int32_t member);

// The artifact's names of the types (docs/FORMAT.md).
inline constexpr std::array<std::string_view, kEventTypeCount> kEventTypeNames = {
    "Malloc", "Calloc", "Realloc", "AlignedAlloc", "Free", "Fork", "Exec", "Exit", "Mapping", "Stack",
    "Rss",    "Mmap",   "Munmap",  "Mremap",       "Brk",  "Interposed", "OwnMemory", "PythonCode"};

std::string_view event_type_name(EventType type);
// Returns false for names this reader does not know (the record is skipped).
bool event_type_from_name(std::string_view name, EventType* out);

inline bool is_allocation(EventType t) {
  return t == EventType::Malloc || t == EventType::Calloc || t == EventType::AlignedAlloc ||
         t == EventType::Realloc;
}

// An allocation or a free: what the heap replay counts.
inline bool is_heap_event(EventType t) { return is_allocation(t) || t == EventType::Free; }

// What an Exec record carries besides the common fields.
struct ProcessImage {
  std::string path;               // the executable's path as passed to execve
  std::string comm;               // the kernel's task name after exec
  std::vector<std::string> argv;  // may be truncated by the kernel-side copy
};

// What a Mapping record carries besides the common fields: one executable
// file mapping of a process. Its first address is the event's `addr`.
struct MappingInfo {
  uint64_t len = 0;          // bytes mapped
  uint64_t file_offset = 0;  // offset in the file of the first mapped byte
  // The file's identity: its GNU build id when the kernel could read it
  // (dev and ino are then 0), otherwise the device, in the kernel's s_dev
  // encoding (major << 20 | minor), and the inode.
  uint64_t dev = 0;
  uint64_t ino = 0;
  std::vector<uint8_t> build_id;
  uint32_t prot = 0;  // PROT_READ | PROT_WRITE | PROT_EXEC bits
  std::string path;   // absolute, as the kernel names it (may end in " (deleted)")
  // The first mapping of an address space created by exec: every earlier
  // mapping of the pid is gone. The kernel maps the new executable and its
  // interpreter before the Exec record's tracepoint fires, so this record
  // precedes the Exec record of the same exec.
  bool new_image = false;

  bool operator==(const MappingInfo&) const = default;
};

// memtrack's interposer (src/interpose/), as the recorder preloads it. Its
// frames on a call path (the trampoline it runs signal handlers from) are
// memtrack's, not the program's.
inline constexpr std::string_view kInterposerLibraryName = "libmemtrack-interpose.so";
// Whether a mapping's path is that library (a string test: the report asks it
// for every frame of every call path).
inline bool is_interposer_library(std::string_view path) {
  if (!path.ends_with(kInterposerLibraryName)) return false;
  return path.size() == kInterposerLibraryName.size() || path[path.size() - kInterposerLibraryName.size() - 1] == '/';
}

// Why the kernel's walk of a copied stack ended (Stack records).
enum class StackEnd : uint8_t {
  Complete,     // reached a frame without caller (_start, a thread's start)
  Truncated,    // the next frame's words could not be read (the live stack's page absent, its limit unknown)
  NoModule,     // a return address outside every known executable mapping
  NoRule,       // no unwind rule known yet for a return address (learned since)
  Unsupported,  // CFI the walker cannot follow (expressions, signal frames)
  BadFrame,     // a CFA outside the copy or not increasing
  NotWalked,    // raw mode: only the bytes were kept
  FrameLimit,   // MT_MAX_FRAMES frames recorded (chain holds the innermost), and the path goes on
};

inline constexpr int kStackEndCount = 8;

inline constexpr std::array<std::string_view, kStackEndCount> kStackEndNames = {
    "complete", "truncated", "no-module", "no-rule", "unsupported", "bad-frame", "not-walked", "frame-limit"};

// The artifact's names: "complete", "truncated", "no-module", "no-rule",
// "unsupported", "bad-frame", "not-walked", "frame-limit" (docs/FORMAT.md).
std::string_view stack_end_name(StackEnd end);
// Returns false for names this reader does not know.
bool stack_end_from_name(std::string_view name, StackEnd* out);

// A distinct call path of allocations (Stack record), emitted once per hash.
// Allocation records refer to it by stack_hash. When the kernel's walk of the
// copied stack was complete, `chain` is the whole path; otherwise the raw
// copy (sp, registers, bytes) lets an offline DWARF unwinder finish it.
struct StackDefinition {
  uint64_t hash = 0;
  // Return addresses, innermost first: chain[0] is the allocator's caller.
  std::vector<uint64_t> chain;
  StackEnd end = StackEnd::Complete;
  uint64_t miss_pc = 0;  // NoRule/NoModule/Unsupported: the address it stopped at
  // Raw fallback (empty when the walk was complete):
  uint64_t sp = 0;                  // user sp the copy starts at
  std::vector<uint64_t> regs;       // DWARF-numbered: 0 rax ... 7 rsp, 8-15 r8-r15, 16 rip
  std::vector<uint8_t> bytes;       // the copied stack, from sp up
  bool truncated = false;           // the copy stopped at the budget, not the stack's end
  // The kernel's frame-pointer walk of the same call, innermost first: it
  // reads user memory past the copy, so for code with frame pointers it may
  // reach further than any unwind of the bytes.
  std::vector<uint64_t> fp_chain;
  // The Python frames of the path, innermost first, two words each: the
  // code object's id (a PythonCode record's), then the index of the native
  // frame running it (in `chain`: the frames go just inside it) << 32 | the
  // instruction (code unit) it executes, 0xffffffff before its first.
  std::vector<uint64_t> python_frames;

  bool operator==(const StackDefinition&) const = default;
};

// What a PythonCode record carries: a code object, as its process had it.
struct PythonCode {
  uint64_t id = 0;
  std::string name, qualname, filename;
  uint32_t first_line = 0;
  std::vector<uint8_t> line_table;  // co_linetable's bytes (3.11's location table)
  bool line_table_cut = false;      // longer than the interposer keeps: later lines are unknown
  bool operator==(const PythonCode&) const = default;
};

struct Event {
  EventType type = EventType::Malloc;
  int32_t pid = 0;  // thread group id
  int32_t tid = 0;
  int32_t member = 0;  // Rss: enum RssMember; OwnMemory: that or kOwnMappedMember
  uint64_t timestamp = 0;  // CLOCK_MONOTONIC ns
  // Malloc/Calloc/AlignedAlloc: the block; Realloc: the new block; Free: the
  // freed block; Mapping: the mapping's first address. 0 for the lifecycle
  // records.
  uint64_t addr = 0;
  uint64_t size = 0;       // allocation records (Realloc: the new size)
  uint64_t old_addr = 0;   // Realloc (0 when realloc(NULL, n)), Mremap, Brk
  uint64_t old_size = 0;   // Mremap only
  int32_t parent_pid = 0;  // Fork only
  int32_t exit_code = 0;   // Exit only: the raw wait status of the group
  std::shared_ptr<const ProcessImage> image;    // Exec only
  std::shared_ptr<const MappingInfo> mapping;  // Mapping only
  // Allocation records: the StackDefinition of the call path, 0 when none
  // was captured.
  uint64_t stack_hash = 0;
  std::shared_ptr<const StackDefinition> stack;  // Stack only
  std::shared_ptr<const PythonCode> python_code;  // PythonCode only

  bool operator==(const Event& other) const;
};

}  // namespace memtrack
