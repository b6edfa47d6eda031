// The text report's sections about call paths: how complete the stacks are,
// the top allocation sites, and the call tree when asked for.
#pragma once

#include <ostream>

#include "report/profile_view.h"

namespace memtrack {

void write_profile_text(const ProfileView& view, std::ostream& out, bool color);

}  // namespace memtrack
