// A Profile as folded stacks, the input of flamegraph.pl, inferno and
// speedscope: one line per distinct call path, "outer;...;inner VALUE".
#pragma once

#include <ostream>

#include "analyze/cost_kind.h"
#include "analyze/profile.h"

namespace memtrack {

// Frames outermost first, one per source frame (inline levels expanded); a
// frame without a function name is "[module basename+0xoffset]", or
// "[0xaddress]" outside every module; a site without a stack is "[no stack]".
// ';' in names becomes ':', line breaks become spaces. Sites with the same
// text are summed, sites costing 0 left out; lines are sorted by text.
void write_folded(const Profile& profile, CostKind cost, std::ostream& out);

}  // namespace memtrack
