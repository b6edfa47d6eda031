// `memtrack report`: the analysis of one recording (analyze/recording_analysis.h)
// written in the output the user chose (output/output.h).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "analyze/call_tree.h"
#include "analyze/cost_kind.h"
#include "analyze/recording_analysis.h"

namespace memtrack {

struct ReportOptions {
  // Which recording and what of it (--pid, --from, --at, --function, ...);
  // the format's needs (sites by thread, site timelines) are set from `format`.
  AnalysisOptions analysis;
  std::string format = "text";  // an output's name (output/output.h)
  std::string output;           // "" = stdout
  size_t top = 10;  // allocating functions and call paths shown; 0: all
  bool verbose = false;             // text: every table
  CostKind by = CostKind::Bytes;
  std::optional<TreeDirection> tree;
};

// Returns 0, or 1 when the artifact is damaged or incomplete (what could be
// read is reported). Throws std::runtime_error for unreadable inputs and
// outputs.
int run_report(const ReportOptions& options);

}  // namespace memtrack
