// `memtrack info` and `memtrack dump`: looking inside an artifact.
// info: the header, format version, counters and frame count of an
// artifact, after reading every frame to check its integrity.
#pragma once

#include <ostream>
#include <string>

namespace memtrack {

// Returns 0 for an intact artifact, 1 when it is damaged or incomplete
// (truncated, not finalized, a corrupt frame). Throws std::runtime_error when
// the file cannot be read or has no valid header.
int run_info(const std::string& path, const std::string& format, std::ostream& out);

// `memtrack dump`: every event as one JSON object per line, in file order.
// Returns 0, or 1 when the artifact is damaged or incomplete (after printing
// every event that could be read).
int run_dump(const std::string& path, std::ostream& out);

}  // namespace memtrack
