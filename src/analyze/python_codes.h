// The Python code objects of a recording (PythonCode records), by id: what
// a Python frame of a call path is named by (function, file, line).
//
// Ownership and rules:
// - PythonCodes owns a copy of each code object's record; the first record
//   of an id is kept (a process defines each code object once; its forked
//   children inherit the definitions with the ids).
// - Lines come from the code object's line table at the frame's
//   instruction (symbolize/python_lines.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "format/event.h"
#include "symbolize/source_frame.h"

namespace memtrack {

class PythonCodes {
 public:
  void add(const PythonCode& code) { codes_.try_emplace(code.id, code); }
  // The frame of `code` at `instruction`: its qualified name, file and line
  // (0 when unknown); none when no record defined the code object.
  std::vector<SourceFrame> frames(uint64_t code, uint32_t instruction) const;

 private:
  absl::flat_hash_map<uint64_t, PythonCode> codes_;
};

// What the report says of the recorded Python processes, from the
// interposer's trailer counters (interposer_python_*): interpreters whose
// frames were not read and why, pymalloc's allocations unseen, stacks cut.
std::vector<std::string> python_notes(const std::map<std::string, uint64_t>& counters);

}  // namespace memtrack
