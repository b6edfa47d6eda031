#include "output/recording_limits.h"

#include <fmt/format.h>

namespace memtrack {

std::vector<std::string> recording_limits(const Report& report) {
  std::vector<std::string> limits;
  if (report.attached)
    limits.push_back(
        "attached to running processes: blocks they allocated before the recording and still hold are not seen, so "
        "the peak and the live figures are of what the recording saw; frees of blocks allocated before it are "
        "counted apart (freed, allocated before), not as unmatched");
  const size_t running = report.running_at_end(), total = report.processes.size();
  if (running > 0) {
    std::string which = running == 1 && total == 1 ? "the process"
                        : running == total         ? fmt::format("all {} processes", total)
                                                   : fmt::format("{} of {} processes", running, total);
    limits.push_back(fmt::format(
        "the recording ended before {}: blocks still live then are live at end, not leaks (the process may free "
        "them later); leaks are counted only where an address space ended (exit, exec)",
        which));
  }
  return limits;
}

}  // namespace memtrack
