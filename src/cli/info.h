// `memtrack info`: the header, format version, counters and frame count of an
// artifact, after reading every frame to check its integrity.
#pragma once

#include <ostream>
#include <string>

namespace memtrack {

// Returns 0 for an intact artifact, 1 when it is truncated or not finalized,
// 2 when a frame is corrupt.
int run_info(const std::string& path, const std::string& format, std::ostream& out);

}  // namespace memtrack
