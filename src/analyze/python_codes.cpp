#include "analyze/python_codes.h"

#include <fmt/format.h>

#include "symbolize/python_lines.h"

namespace memtrack {

std::vector<SourceFrame> PythonCodes::frames(uint64_t code, uint32_t instruction) const {
  auto known = codes_.find(code);
  if (known == codes_.end()) return {};
  const PythonCode& c = known->second;
  SourceFrame frame;
  frame.function = c.qualname.empty() ? c.name : c.qualname;
  frame.file = c.filename;
  frame.line = python_line(c.line_table, c.first_line, instruction).value_or(0);
  return {frame};
}

std::vector<std::string> python_notes(const std::map<std::string, uint64_t>& counters) {
  auto count = [&](const char* name) {
    auto it = counters.find(name);
    return it == counters.end() ? 0 : it->second;
  };
  auto processes = [](uint64_t n) { return fmt::format("{} process{}", n, n == 1 ? "" : "es"); };
  std::vector<std::string> notes;
  if (uint64_t n = count("interposer_python_refused_version"))
    notes.push_back(fmt::format(
        "Python frames: {} ran a CPython whose frames memtrack cannot read (supported: 3.11); their call paths "
        "show the interpreter's native frames only",
        processes(n)));
  if (uint64_t n = count("interposer_python_refused_layout"))
    notes.push_back(fmt::format(
        "Python frames: {} ran a CPython 3.11 whose code type did not match memtrack's layout table (size, "
        "members); their call paths show the interpreter's native frames only",
        processes(n)));
  if (uint64_t n = count("interposer_python_pymalloc"))
    notes.push_back(fmt::format(
        "Python: {} ran without PYTHONMALLOC=malloc: pymalloc serves objects of up to 512 bytes from its own "
        "arenas (256 KiB mappings, counted as mapped memory), so only larger blocks are allocations here; run "
        "with PYTHONMALLOC=malloc to see every object",
        processes(n)));
  if (uint64_t n = count("interposer_python_frames_cut"))
    notes.push_back(fmt::format("Python frames: {} call paths deeper than 128 Python frames keep their innermost 128",
                                n));
  return notes;
}

}  // namespace memtrack
