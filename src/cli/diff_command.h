// `memtrack diff BASE HEAD` and `memtrack check FILE`: two recordings
// compared, or one tested, against memory budgets (docs/REPORT.md).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "analyze/cost_kind.h"
#include "analyze/recording_analysis.h"

namespace memtrack {

struct DiffOptions {
  std::string base;  // "" for check
  std::string head;  // check: the recording
  std::string format = "text";  // text, json, markdown
  std::string output;           // "" = stdout
  CostKind by = CostKind::Bytes;
  size_t top = 10;  // changed call paths shown; 0: all
  std::vector<std::string> fail_if;  // broken when they hold
  std::vector<std::string> max;      // broken when they do not hold (check)
  // How each recording is analysed: symbols, --modules, suppressions,
  // runtime leaks (no filters; `file` is set from base and head).
  AnalysisOptions analysis;
};

// Exit statuses (README.md): 0 every budget held, 4 a budget broke, 2 a
// budget is malformed or cannot be evaluated on these recordings, 1 (when no
// budget broke) an artifact is damaged. Throws std::runtime_error for
// unreadable inputs and outputs.
int run_diff(const DiffOptions& options);
int run_check(const DiffOptions& options);

}  // namespace memtrack
