// The analysis's progress on stderr, only when it is a terminal (never in
// logs or pipes): events read, then the phase that follows; the line, once
// written, is cleared when the object goes.
#pragma once

#include <unistd.h>

#include <fmt/format.h>

#include <cstdint>
#include <iostream>

#include "analyze/recording_analysis.h"

namespace memtrack {

class TerminalProgress {
 public:
  TerminalProgress() : enabled_(isatty(STDERR_FILENO) == 1) {}
  TerminalProgress(const TerminalProgress&) = delete;
  TerminalProgress& operator=(const TerminalProgress&) = delete;
  ~TerminalProgress() {
    if (written_) std::cerr << "\r\x1b[K" << std::flush;
  }

  // Callbacks for AnalysisOptions::progress; none when disabled.
  AnalysisProgress callbacks() {
    if (!enabled_) return {};
    return {[this](uint64_t events) {
              written_ = true;
              std::cerr << fmt::format("\rmemtrack: {:.1f} M events read", static_cast<double>(events) / 1e6)
                        << std::flush;
            },
            [this] {
              written_ = true;
              std::cerr << "\rmemtrack: unwinding and symbolizing                    " << std::flush;
            }};
  }

 private:
  bool enabled_;
  bool written_ = false;
};

}  // namespace memtrack
