#include "format/event.h"

#include <array>

namespace memtrack {

namespace {

// A type or reason added to the enum without a name would read back as "".
static_assert(static_cast<int>(EventType::PythonCode) + 1 == kEventTypeCount);
static_assert(static_cast<int>(StackEnd::FrameLimit) + 1 == kStackEndCount);

template <typename Enum, size_t N>
bool from_name(const std::array<std::string_view, N>& names, std::string_view name, Enum* out) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) {
      *out = static_cast<Enum>(i);
      return true;
    }
  }
  return false;
}

// Both are shared_ptrs to const data: equal when both are null or both hold
// equal values.
template <typename T>
bool same_pointee(const std::shared_ptr<const T>& a, const std::shared_ptr<const T>& b) {
  return a == b || (a && b && *a == *b);
}
}  // namespace

std::string_view event_type_name(EventType type) { return kEventTypeNames[static_cast<size_t>(type)]; }

bool event_type_from_name(std::string_view name, EventType* out) {
  return from_name(kEventTypeNames, name, out);
}

std::string_view rss_member_name(int32_t member) {
  static constexpr std::array<std::string_view, kRssMemberCount> kMembers = {"file", "anon", "swap", "shmem"};
  return member >= 0 && member < kRssMemberCount ? kMembers[member] : "unknown";
}

std::string_view stack_end_name(StackEnd end) {
  return kStackEndNames[static_cast<size_t>(end)];
}

bool stack_end_from_name(std::string_view name, StackEnd* out) {
  return from_name(kStackEndNames, name, out);
}

bool Event::operator==(const Event& o) const {
  bool same_image = image == o.image ||
                    (image && o.image && image->path == o.image->path &&
                     image->comm == o.image->comm && image->argv == o.image->argv);
  return type == o.type && pid == o.pid && tid == o.tid && timestamp == o.timestamp &&
         addr == o.addr && size == o.size && old_addr == o.old_addr && member == o.member && old_size == o.old_size &&
         parent_pid == o.parent_pid && exit_code == o.exit_code && same_image &&
         same_pointee(mapping, o.mapping) && stack_hash == o.stack_hash &&
         same_pointee(stack, o.stack) && same_pointee(python_code, o.python_code);
}

}  // namespace memtrack
