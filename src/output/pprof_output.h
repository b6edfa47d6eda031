// A Profile as a pprof profile (gzipped perftools.profiles.Profile, see
// profile.proto), for `go tool pprof` and every tool reading that format.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>

#include "analyze/profile.h"

namespace memtrack {

// Sample types, in this order: alloc_objects/count, alloc_space/bytes,
// inuse_objects/count, inuse_space/bytes (inuse: live when the address space
// ended, at exit or exec, i.e. leaked, or when the recording ended, the
// process still running, i.e. live at end; a comment then says how much of
// each), peak_objects/count, peak_space/bytes (live at the
// heap's peak); the default is inuse_space, as in Go's heap profiles (the
// names Pyroscope and Parca know). One sample per site, leaf first; a site
// without frames gets the single location of its stackless_label. A site of
// one thread (ProfileOptions::split_by_thread) carries the string labels pid,
// thread and command (from `commands`, by pid). Throws std::runtime_error
// when compressing or writing fails.
void write_pprof(const Profile& profile, std::ostream& out, const std::map<int32_t, std::string>& commands = {});

}  // namespace memtrack
