#include "output/text/units.h"

#include <array>
#include <string_view>

#include <sys/wait.h>

#include <fmt/format.h>

namespace memtrack {

namespace {
constexpr std::array<std::string_view, 7> kByteUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
}

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes) / 1024.0;
  size_t unit = 1;
  // Move up when rounding would print "1024.0" in the smaller unit.
  while (value >= 1023.95 && unit + 1 < kByteUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  if (value < 99.995) return fmt::format("{:.2f} {}", value, kByteUnits[unit]);
  return fmt::format("{:.1f} {}", value, kByteUnits[unit]);
}

std::string format_thousands(uint64_t count) {
  std::string digits = fmt::format("{}", count);
  std::string grouped;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return grouped;
}

std::string count_of(uint64_t count, std::string_view noun) {
  return fmt::format("{} {}{}", format_thousands(count), noun, count == 1 ? "" : "s");
}

std::string format_bytes_exact(uint64_t bytes) {
  if (bytes < 1024) return format_bytes(bytes);
  return fmt::format("{} ({} B)", format_bytes(bytes), format_thousands(bytes));
}

std::string format_power_of_two(uint64_t bytes) {
  size_t unit = 0;
  while (bytes >= 1024 && bytes % 1024 == 0 && unit + 1 < kByteUnits.size()) {
    bytes /= 1024;
    ++unit;
  }
  return fmt::format("{} {}", bytes, kByteUnits[unit]);
}

std::string format_duration(uint64_t ns) {
  // The thresholds sit where rounding would print "1000.00 ms" or "100.00 s".
  if (ns < 999'995'000) return fmt::format("{:.2f} ms", static_cast<double>(ns) / 1e6);
  if (ns < 99'995'000'000) return fmt::format("{:.2f} s", static_cast<double>(ns) / 1e9);
  return fmt::format("{:.1f} s", static_cast<double>(ns) / 1e9);
}

std::string format_count(uint64_t count, size_t width) {
  std::string digits = fmt::format("{}", count);
  if (digits.size() <= width) return digits;
  constexpr std::array<std::string_view, 6> kSuffixes = {"K", "M", "G", "T", "P", "E"};
  double value = static_cast<double>(count);
  size_t suffix = 0;
  value /= 1000.0;
  while (value >= 999.95 && suffix + 1 < kSuffixes.size()) {
    value /= 1000.0;
    ++suffix;
  }
  return fmt::format("{:.1f}{}", value, kSuffixes[suffix]);
}

std::string format_wait_status(int32_t status) {
  if (WIFEXITED(status)) return fmt::format("exit {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("signal {}", WTERMSIG(status));
  return fmt::format("status {:#x}", status);
}

double percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace memtrack
