// A Profile as a pprof profile (gzipped perftools.profiles.Profile, see
// profile.proto), for `go tool pprof` and every tool reading that format.
#pragma once

#include <ostream>

#include "analyze/profile.h"

namespace memtrack {

// Sample types, in this order: alloc_objects/count, alloc_space/bytes,
// inuse_objects/count, inuse_space/bytes (inuse = leaked: live at exit, exec
// or the end of the trace); the default is inuse_space, as in Go's heap
// profiles. One sample per site, leaf first; a site without a stack gets the
// single location "[no stack]". Throws std::runtime_error when compressing or
// writing fails.
void write_pprof(const Profile& profile, std::ostream& out);

}  // namespace memtrack
