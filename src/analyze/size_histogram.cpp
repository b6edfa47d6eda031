#include "analyze/size_histogram.h"

#include <algorithm>
#include <bit>

namespace memtrack {

namespace {
// Bucket b (b < kBucketCount - 1) holds sizes up to 2^(b + kFirstBoundLog2).
constexpr int kFirstBoundLog2 = 3;
}  // namespace

size_t SizeHistogram::bucket_of(uint64_t size) {
  if (size <= (uint64_t{1} << kFirstBoundLog2)) return 0;
  // Sizes in (2^(k-1), 2^k] have bit_width(size - 1) == k.
  size_t bucket = static_cast<size_t>(std::bit_width(size - 1)) - kFirstBoundLog2;
  return std::min(bucket, kBucketCount - 1);
}

uint64_t SizeHistogram::bucket_min(size_t bucket) {
  if (bucket == 0) return 0;
  return (uint64_t{1} << (bucket - 1 + kFirstBoundLog2)) + 1;
}

std::optional<uint64_t> SizeHistogram::bucket_max(size_t bucket) {
  if (bucket + 1 >= kBucketCount) return std::nullopt;
  return uint64_t{1} << (bucket + kFirstBoundLog2);
}

void SizeHistogram::merge(const SizeHistogram& other) {
  for (size_t i = 0; i < kBucketCount; ++i) counts_[i] += other.counts_[i];
}

}  // namespace memtrack
