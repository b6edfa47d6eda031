// `memtrack convert`: an artifact rewritten in another layout (the compact
// one, format_version 3, or the seed's Records layout, format_version 2, for
// tools that read it), or aggregated.
#pragma once

#include <ostream>

#include "format/artifact.h"

namespace memtrack {

// Writes every event and Module record of `in` to `out` in `layout`, with
// the same header (its format_version the layout's) and trailer. Returns 0,
// or 1 when `in` is damaged or incomplete (after converting every event that
// could be read; the reader's warnings go to `err`). Throws
// std::runtime_error when `in` cannot be read or `out` written.
// `aggregate`: an aggregated artifact (record --aggregate,
// analyze/heap_aggregate.h) of the events of `in`, which must not be one.
int run_convert(const std::string& in, const std::string& out, ArtifactLayout layout, bool aggregate,
                std::ostream& err);

}  // namespace memtrack
