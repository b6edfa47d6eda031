#include "format/event.h"

#include <array>

namespace memtrack {

namespace {
constexpr std::array<std::string_view, kEventTypeCount> kNames = {
    "Malloc", "Calloc", "Realloc", "AlignedAlloc", "Free", "Fork", "Exec", "Exit", "Mapping"};
}

std::string_view event_type_name(EventType type) { return kNames[static_cast<size_t>(type)]; }

bool event_type_from_name(std::string_view name, EventType* out) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) {
      *out = static_cast<EventType>(i);
      return true;
    }
  }
  return false;
}

bool Event::operator==(const Event& o) const {
  bool same_image = image == o.image ||
                    (image && o.image && image->path == o.image->path &&
                     image->comm == o.image->comm && image->argv == o.image->argv);
  bool same_mapping = mapping == o.mapping || (mapping && o.mapping && *mapping == *o.mapping);
  return type == o.type && pid == o.pid && tid == o.tid && timestamp == o.timestamp &&
         addr == o.addr && size == o.size && old_addr == o.old_addr &&
         parent_pid == o.parent_pid && exit_code == o.exit_code && same_image &&
         same_mapping;
}

}  // namespace memtrack
