// `memtrack info` and `memtrack dump`: looking inside an artifact.
// info: the header, format version, counters and frame count of an
// artifact, after reading every frame to check its integrity.
#pragma once

#include <ostream>
#include <string>

namespace memtrack {

// Returns 0 for an intact artifact, 1 when it is truncated or not finalized,
// 2 when a frame is corrupt.
int run_info(const std::string& path, const std::string& format, std::ostream& out);

// `memtrack dump`: every event as one JSON object per line, in file order.
// Returns 0, or 2 when a frame is corrupt (after printing what precedes it).
int run_dump(const std::string& path, std::ostream& out);

}  // namespace memtrack
