// Allocation counts by size in power-of-two buckets: <= 8 B, 9-16 B, 17-32 B,
// ..., (512 MiB, 1 GiB], and a last open-ended bucket for sizes above 1 GiB.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace memtrack {

class SizeHistogram {
 public:
  // 28 bounded buckets (upper bounds 2^3 .. 2^30) plus the open-ended one.
  static constexpr size_t kBucketCount = 29;

  static size_t bucket_of(uint64_t size);
  // Smallest size the bucket holds (0 for the first bucket).
  static uint64_t bucket_min(size_t bucket);
  // Largest size the bucket holds; nullopt for the open-ended last bucket.
  static std::optional<uint64_t> bucket_max(size_t bucket);

  void add(uint64_t size) { ++counts_[bucket_of(size)]; }
  void merge(const SizeHistogram& other);
  void add_count(size_t bucket, uint64_t count) { counts_[bucket] += count; }
  uint64_t count(size_t bucket) const { return counts_[bucket]; }

  bool operator==(const SizeHistogram&) const = default;

 private:
  std::array<uint64_t, kBucketCount> counts_{};
};

}  // namespace memtrack
