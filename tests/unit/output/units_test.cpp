#include "output/text/units.h"

#include <gtest/gtest.h>

namespace memtrack {
namespace {

TEST(Units, Bytes) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.00 KiB");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(100 * 1024), "100.0 KiB");
  EXPECT_EQ(format_bytes(1024 * 1024 - 1), "1.00 MiB");  // not "1024.0 KiB"
  EXPECT_EQ(format_bytes(uint64_t{3} << 30), "3.00 GiB");
  EXPECT_EQ(format_bytes(UINT64_MAX), "16.00 EiB");
}

TEST(Units, PowersOfTwo) {
  EXPECT_EQ(format_power_of_two(8), "8 B");
  EXPECT_EQ(format_power_of_two(512), "512 B");
  EXPECT_EQ(format_power_of_two(1024), "1 KiB");
  EXPECT_EQ(format_power_of_two(uint64_t{1} << 30), "1 GiB");
}

TEST(Units, Durations) {
  EXPECT_EQ(format_duration(0), "0.00 ms");
  EXPECT_EQ(format_duration(12'345'678), "12.35 ms");
  EXPECT_EQ(format_duration(999'999'999), "1.00 s");
  EXPECT_EQ(format_duration(61'500'000'000), "61.50 s");
  EXPECT_EQ(format_duration(3'600'000'000'000), "3600.0 s");
}

TEST(Units, Counts) {
  EXPECT_EQ(format_count(12345678, 8), "12345678");
  EXPECT_EQ(format_count(123456789, 8), "123.5M");
  EXPECT_EQ(format_count(999'960'000, 8), "1.0G");
  EXPECT_EQ(format_count(UINT64_MAX, 8), "18.4E");
}

TEST(Units, ThousandsAndExactBytes) {
  EXPECT_EQ(format_thousands(0), "0");
  EXPECT_EQ(format_thousands(999), "999");
  EXPECT_EQ(format_thousands(1000), "1,000");
  EXPECT_EQ(format_thousands(1234567), "1,234,567");
  EXPECT_EQ(format_thousands(UINT64_MAX), "18,446,744,073,709,551,615");
  EXPECT_EQ(format_bytes_exact(1023), "1023 B");
  EXPECT_EQ(format_bytes_exact(1234567), "1.18 MiB (1,234,567 B)");
  EXPECT_EQ(count_of(1, "block"), "1 block");
  EXPECT_EQ(count_of(12345, "call path"), "12,345 call paths");
}

TEST(Units, WaitStatus) {
  EXPECT_EQ(format_wait_status(0), "exit 0");
  EXPECT_EQ(format_wait_status(3 << 8), "exit 3");
  EXPECT_EQ(format_wait_status(9), "signal 9");
}

}  // namespace
}  // namespace memtrack
