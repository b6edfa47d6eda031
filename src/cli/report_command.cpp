#include "cli/report_command.h"

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "analyze/heap_analyzer.h"
#include "format/artifact.h"
#include "report/folded_output.h"
#include "report/json_report.h"
#include "report/pprof_output.h"
#include "report/text_report.h"

namespace memtrack {
namespace {

constexpr uint64_t kProgressEvery = 1 << 20;

uint64_t seconds_to_ns(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) throw std::runtime_error("--from/--to must be seconds >= 0");
  return static_cast<uint64_t>(seconds * 1e9);
}

// Progress on stderr, only when it is a terminal (never in logs or pipes).
class Progress {
 public:
  Progress() : enabled_(isatty(STDERR_FILENO) == 1) {}
  void event() {
    if (enabled_ && ++events_ % kProgressEvery == 0)
      std::cerr << "\rmemtrack: " << events_ / 1'000'000.0 << " M events read" << std::flush;
  }
  void phase(const char* what) {
    if (enabled_) std::cerr << "\rmemtrack: " << what << "                    " << std::flush;
  }
  ~Progress() {
    if (enabled_) std::cerr << "\r\x1b[K" << std::flush;
  }

 private:
  bool enabled_;
  uint64_t events_ = 0;
};

}  // namespace

int run_report(const ReportOptions& options) {
  ArtifactHeader header = read_artifact_header(options.file);
  ProfileOptions profile_options;
  profile_options.filter.pids = options.pids;
  profile_options.filter.tids = options.tids;
  if (options.from_s) profile_options.filter.from_ns = seconds_to_ns(*options.from_s);
  if (options.to_s) profile_options.filter.to_ns = seconds_to_ns(*options.to_s);
  profile_options.symbols = options.symbols;
  profile_options.function = options.function;
  if (!options.suppressions_file.empty())
    profile_options.suppressions = Suppressions::from_file(options.suppressions_file);

  HeapAnalyzer analyzer;
  ProfileBuilder profile_builder(std::move(profile_options), header.start_monotonic_ns);
  std::optional<Report> report;
  std::optional<Profile> profile;
  ReadResult read;
  {
    Progress progress;
    read = read_artifact(
        options.file,
        [&](const Event& e) {
          analyzer.on_event(e);
          profile_builder.on_event(e);
          progress.event();
        },
        [&](const ModuleInfo& m) { profile_builder.on_module(m); });
    progress.phase("unwinding and symbolizing");
    std::vector<std::string> warnings = read.warnings;
    if (read.error) warnings.push_back(*read.error);
    report = analyzer.build_report(read.header, read.trailer, warnings);
    profile = profile_builder.build();
  }

  std::ofstream file;
  if (!options.output.empty()) {
    file.open(options.output, std::ios::binary);
    if (!file) throw std::runtime_error("cannot write " + options.output);
  } else if (options.format == "pprof" && isatty(STDOUT_FILENO)) {
    throw std::runtime_error("a pprof profile is binary: give -o FILE (or redirect stdout)");
  }
  std::ostream& out = options.output.empty() ? std::cout : file;
  ProfileView view{&*profile, options.by, options.top, options.tree};
  if (options.format == "json") {
    write_json_report(*report, out, &view);
  } else if (options.format == "folded") {
    write_folded(*profile, options.by, out);
  } else if (options.format == "pprof") {
    write_pprof(*profile, out);
  } else {
    write_text_report(*report, out, options.output.empty() && isatty(STDOUT_FILENO), &view);
  }
  out.flush();
  if (!out) throw std::runtime_error("cannot write " + (options.output.empty() ? "stdout" : options.output));
  if (read.error) std::cerr << "memtrack: " << *read.error << "\n";
  return read.error ? 2 : 0;
}

}  // namespace memtrack
