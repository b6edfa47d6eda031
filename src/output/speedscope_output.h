// A Profile as a speedscope file (https://www.speedscope.app, its JSON file
// format: tests/speedscope/file-format-schema.json).
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>

#include "analyze/profile.h"

namespace memtrack {

// One "sampled" profile per process and cost (allocated bytes, allocation
// count, bytes live at the heap's peak, leaked bytes, and where the recording
// ended before a process, bytes live at its end), in that order, each
// sample a site (root first) weighed by that cost; sites of cost 0 are left
// out. Processes come from ProfileSite::pid (ProfileOptions::split_by_thread;
// threads of a process are summed), named "pid N: COMMAND" with `commands`
// by pid; sites without a pid form one profile "all processes". Frames are
// shared: one per function, source file and line. Throws std::runtime_error
// when a site refers to a location the profile does not have.
void write_speedscope(const Profile& profile, std::ostream& out, const std::map<int32_t, std::string>& commands = {});

}  // namespace memtrack
