// The in-memory form of one artifact record, shared by the recorder, the
// artifact writer/reader and the analysis. Field names follow the seed
// system's event stream (see docs/FORMAT.md).
#pragma once

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
};

inline constexpr int kEventTypeCount = 8;

std::string_view event_type_name(EventType type);
// Returns false for names this reader does not know (the record is skipped).
bool event_type_from_name(std::string_view name, EventType* out);

inline bool is_allocation(EventType t) {
  return t == EventType::Malloc || t == EventType::Calloc || t == EventType::AlignedAlloc ||
         t == EventType::Realloc;
}

// What an Exec record carries besides the common fields.
struct ProcessImage {
  std::string path;               // the executable's path as passed to execve
  std::string comm;               // the kernel's task name after exec
  std::vector<std::string> argv;  // may be truncated by the kernel-side copy
};

struct Event {
  EventType type = EventType::Malloc;
  int32_t pid = 0;  // thread group id
  int32_t tid = 0;
  uint64_t timestamp = 0;  // CLOCK_MONOTONIC ns
  // Malloc/Calloc/AlignedAlloc: the block; Realloc: the new block; Free: the
  // freed block. 0 for the lifecycle records.
  uint64_t addr = 0;
  uint64_t size = 0;       // allocation records (Realloc: the new size)
  uint64_t old_addr = 0;   // Realloc only; 0 when realloc(NULL, n)
  int32_t parent_pid = 0;  // Fork only
  int32_t exit_code = 0;   // Exit only: the raw wait status of the group
  std::shared_ptr<const ProcessImage> image;  // Exec only

  bool operator==(const Event& other) const;
};

}  // namespace memtrack
