// The seam every output of `memtrack report` plugs into: each output is one
// entry of the registry below (a name, what it is, how it wants its sink, and
// its write function), given the analysed recording, the options the user
// chose and a sink for its bytes. The CLI, its --help and the docs' format
// list all read the registry (tests/unit/output/output_registry_test.cpp
// holds the docs to it). docs/ARCHITECTURE.md, "Adding an output", says how to
// add one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include "analyze/call_tree.h"
#include "analyze/cost_kind.h"
#include "analyze/profile.h"
#include "analyze/report.h"
#include "analyze/timeline.h"

namespace memtrack {

// The analysed recording: per-process heap figures (with the artifact's
// header, trailer and the reader's warnings), the profile of call paths and
// memory over time (none when null).
struct ReportModel {
  const Report& report;
  const Profile& profile;
  const Timeline* timeline = nullptr;
};

// Each process's command line, by pid (a reused pid: its last incarnation).
std::map<int32_t, std::string> commands_by_pid(const Report& report);

// What the user asked for; an output ignores what it has no use for.
struct OutputOptions {
  CostKind by = CostKind::Bytes;  // ranks sites, weighs stacks
  size_t top = 10;                // sites and allocating functions shown; 0: all
  std::optional<TreeDirection> tree;
  bool verbose = false;
  bool color = false;  // the sink is a terminal: ANSI colors allowed
  // When the filters selected no allocation: what they matched and what the
  // recording has. Outputs that cannot carry it leave it to the CLI (stderr).
  std::string filter_note{};
  // The file written (-o), empty for stdout: for outputs whose readers go
  // by the name (heaptrack decompresses a ".gz").
  std::string output_path{};
};

struct OutputFormat {
  std::string_view name;     // --format NAME
  std::string_view summary;  // for --help: what it is and who reads it
  std::string_view noun;     // in messages: "pprof profile"
  bool binary = false;       // never written to a terminal
  // Whether the output holds the reader's warnings and the filter note;
  // otherwise the CLI prints them on stderr.
  bool carries_notes = true;
  // Whether it wants one site per call path, process and thread
  // (ProfileOptions::split_by_thread; ProfileSite::pid, tid).
  bool sites_by_thread = false;
  // Whether it wants each call path's allocations over time (Timeline::sites).
  bool site_timelines = false;
  // Writes the whole output to `sink`; throws std::runtime_error when it
  // cannot (the CLI reports it).
  void (*write)(const ReportModel& model, const OutputOptions& options, std::ostream& sink) = nullptr;
};

// Every output, the default (text) first.
std::span<const OutputFormat* const> output_formats();
// nullptr for a name no output has.
const OutputFormat* find_output_format(std::string_view name);
// The names joined by `separator`: "text|json|folded|pprof".
std::string output_format_names(std::string_view separator);

}  // namespace memtrack
