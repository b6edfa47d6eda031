// The text report's sections about call paths: how complete the stacks are,
// the top allocating functions and call paths, and the call tree when asked for.
#pragma once

#include <ostream>

#include "output/profile_view.h"

namespace memtrack {

// Default: a line on how the call paths end, the top allocating functions
// with their largest call paths, and the top leaks. Verbose: also the
// outcome table, the top call paths with their frames, and every warning.
void write_profile_text(const ProfileView& view, std::ostream& out, bool color, bool verbose = false);

}  // namespace memtrack
