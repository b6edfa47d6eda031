// libdwfl's (elfutils) unwinder on recorded raw stack copies, producing the
// same UnwoundStack as StackUnwinder: an independent check of it and of the
// kernel's walk, and the reference in benchmarks.
//
// One DwflUnwinder per process image: its executable mappings are reported
// once (each file at its load bias), then unwind() runs libdwfl's frame
// unwinder on one definition at a time, reading memory only from that
// definition's copy. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/event.h"
#include "unwind/stack_unwinder.h"

namespace memtrack {

// One executable mapping: [start, end) maps `path` from file_offset.
struct DwflMapping {
  std::string path;
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t file_offset = 0;
};

class DwflUnwinder {
 public:
  // Mappings of anything but an absolute path ("[vdso]", ...) and of
  // "(deleted)" files are left out: their code has no module.
  explicit DwflUnwinder(const std::vector<DwflMapping>& mappings, size_t max_frames = kMaxStackFrames);
  ~DwflUnwinder();
  DwflUnwinder(const DwflUnwinder&) = delete;
  DwflUnwinder& operator=(const DwflUnwinder&) = delete;

  // Empty when every file was reported and the state attached; otherwise
  // what failed (unwind() then returns NoModule at once).
  const std::string& error() const;
  size_t modules() const;  // files reported

  // libdwfl's end mapped onto UnwindStop:
  //  - it ends the unwind (no error) when the caller's pc is undefined, and
  //    it takes an unreadable return address (a read outside the copy) for
  //    undefined too: a failed read after the last frame is TruncatedCopy
  //    or BadCfa (StackUnwinder's rule), otherwise Complete;
  //  - an error at a pc outside every reported module is NoModule, after a
  //    failed read TruncatedCopy/BadCfa, otherwise NoCfi.
  // libdwfl falls back to the frame-pointer chain by itself (x86-64 backend)
  // without saying so: frame_pointer_fallback stays false.
  // `frame_sps`, when given, receives for each return address the rsp of its
  // frame as libdwfl recovered it (the return address was read at rsp - 8;
  // 0 when unknown).
  UnwoundStack unwind(const StackDefinition& definition, std::vector<uint64_t>* frame_sps = nullptr);

  // "0x... symbol+0xoff (file)" for diagnostics; `pc` a return address unless
  // `activation` (then looked up at pc rather than pc - 1).
  std::string describe(uint64_t pc, bool activation) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace memtrack
