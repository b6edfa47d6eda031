#include "analyze/size_histogram.h"

#include <gtest/gtest.h>

namespace memtrack {
namespace {

TEST(SizeHistogram, BucketOfPowerOfTwoBoundaries) {
  EXPECT_EQ(SizeHistogram::bucket_of(0), 0u);
  EXPECT_EQ(SizeHistogram::bucket_of(8), 0u);
  EXPECT_EQ(SizeHistogram::bucket_of(9), 1u);
  EXPECT_EQ(SizeHistogram::bucket_of(16), 1u);
  EXPECT_EQ(SizeHistogram::bucket_of(17), 2u);
  EXPECT_EQ(SizeHistogram::bucket_of(4096), 9u);
  EXPECT_EQ(SizeHistogram::bucket_of(4097), 10u);
  EXPECT_EQ(SizeHistogram::bucket_of(uint64_t{1} << 30), SizeHistogram::kBucketCount - 2);
  EXPECT_EQ(SizeHistogram::bucket_of((uint64_t{1} << 30) + 1), SizeHistogram::kBucketCount - 1);
  EXPECT_EQ(SizeHistogram::bucket_of(UINT64_MAX), SizeHistogram::kBucketCount - 1);
}

TEST(SizeHistogram, BucketsTileTheSizesWithoutGaps) {
  EXPECT_EQ(SizeHistogram::bucket_min(0), 0u);
  EXPECT_EQ(SizeHistogram::bucket_max(0), 8u);
  for (size_t i = 1; i < SizeHistogram::kBucketCount; ++i) {
    ASSERT_TRUE(SizeHistogram::bucket_max(i - 1).has_value());
    EXPECT_EQ(SizeHistogram::bucket_min(i), *SizeHistogram::bucket_max(i - 1) + 1) << i;
    EXPECT_EQ(SizeHistogram::bucket_of(SizeHistogram::bucket_min(i)), i);
    if (auto max = SizeHistogram::bucket_max(i)) {
      EXPECT_EQ(SizeHistogram::bucket_of(*max), i);
    }
  }
  EXPECT_EQ(SizeHistogram::bucket_max(SizeHistogram::kBucketCount - 2), uint64_t{1} << 30);
  EXPECT_FALSE(SizeHistogram::bucket_max(SizeHistogram::kBucketCount - 1).has_value());
}

TEST(SizeHistogram, MergeAddsCounts) {
  SizeHistogram a;
  SizeHistogram b;
  a.add(1);
  a.add(100);
  b.add(2);
  a.merge(b);
  EXPECT_EQ(a.count(0), 2u);
  EXPECT_EQ(a.count(SizeHistogram::bucket_of(100)), 1u);
}

}  // namespace
}  // namespace memtrack
