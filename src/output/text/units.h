// Human-readable quantities for the text report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace memtrack {

// Base-1024: "512 B", "1.50 KiB", "123.4 MiB" (2 decimals below 100, else 1).
// At most 10 characters.
std::string format_bytes(uint64_t bytes);
// Digits grouped by thousands: "1,234,567".
std::string format_thousands(uint64_t count);
// "1 block", "2,345 blocks": the count with thousands separators and the
// noun in the singular or plural (an "s" added).
std::string count_of(uint64_t count, std::string_view noun);
// The rounded size and the exact one, for figures users compare:
// "1.18 MiB (1,234,567 B)"; "512 B" alone below 1 KiB.
std::string format_bytes_exact(uint64_t bytes);
// An exact power-of-two size without decimals: "8 B", "1 KiB", "512 MiB".
std::string format_power_of_two(uint64_t bytes);
// "12.34 ms" below a second, "1.23 s" below 100 s, else "1234.5 s".
std::string format_duration(uint64_t ns);
// Digits when they fit in width, else compact ("123.4M", "12.3G"; at most
// 6 characters).
std::string format_count(uint64_t count, size_t width);
// A raw wait status: "exit 0", "signal 9" (else "status 0x..").
std::string format_wait_status(int32_t status);
// `part` as a percentage of `whole`; 0 when `whole` is 0.
double percent(uint64_t part, uint64_t whole);

}  // namespace memtrack
