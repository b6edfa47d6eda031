// `memtrack report`: one streamed pass over an artifact feeds the
// per-process heap figures and the profile of allocation sites, rendered as
// text, JSON, folded stacks or pprof.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "analyze/call_tree.h"
#include "analyze/cost_kind.h"
#include "analyze/profile_builder.h"
#include "analyze/report.h"
#include "analyze/timeline.h"

namespace memtrack {

struct ReportOptions {
  std::string file;
  std::string format = "text";  // an output's name (output/output.h)
  std::string output;           // "" = stdout
  size_t top = 10;  // allocating functions and call paths shown; 0: all
  bool verbose = false;             // text: every table
  bool show_runtime_leaks = false;  // count the C/C++ runtime's blocks as leaks
  CostKind by = CostKind::Bytes;
  std::optional<TreeDirection> tree;
  std::optional<double> from_s, to_s;
  std::optional<double> at_s;  // sites by what they had live then, instead of at the peak
  std::vector<int32_t> pids, tids;
  std::string function;
  std::string suppressions_file;
  SymbolizerOptions symbols;
  std::string modules_dir;  // export-modules output for files missing here
  bool call_paths = true;   // false: heap figures only, no unwinding or symbolizing (check)
};

// One artifact analysed: per-process heap figures, the profile of
// allocation sites, memory over time, and what the reader found wrong.
struct AnalyzedRecording {
  Report report;
  Profile profile;
  std::vector<std::string> read_warnings;
  std::optional<std::string> read_error;
  Timeline timeline;  // memory over time, in the --from/--to window
  bool damaged() const { return read_error || !read_warnings.empty(); }
};

// The analysis of `report` (every option but the output ones); shared with
// `diff` and `check`. Throws std::runtime_error for unreadable inputs.
AnalyzedRecording analyze_recording(const ReportOptions& options);

// Returns 0, or 1 when the artifact is damaged or incomplete (what could be
// read is reported). Throws std::runtime_error for unreadable inputs and
// outputs.
int run_report(const ReportOptions& options);

}  // namespace memtrack
