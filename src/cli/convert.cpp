#include "cli/convert.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <optional>
#include <utility>

#include "analyze/heap_aggregate.h"
#include "analyze/report.h"
#include "cli/exit_status.h"

namespace memtrack {

int run_convert(const std::string& in, const std::string& out, ArtifactLayout layout, bool aggregate,
                std::ostream& err) {
  ArtifactHeader header = read_artifact_header(in);
  if (std::find(header.features.begin(), header.features.end(), kAggregatedFeature) != header.features.end())
    throw std::runtime_error(in + ": an aggregated recording keeps figures, not events: there is nothing to convert");
  header.format_version = kFormatVersion;  // the writer gives the layout's
  WriterOptions options{.layout = layout};
  if (aggregate)
    options.aggregator = std::make_shared<HeapAggregator>(header.start_monotonic_ns, recording_attached(header));
  ArtifactWriter writer(out, header, options);
  ReadResult read = read_artifact(
      in, [&](const Event& event) { writer.append(event); },
      [&](const ModuleInfo& module) { writer.append_module(std::make_shared<const ModuleInfo>(module)); });
  for (const auto& warning : read.warnings) err << "memtrack: warning: " << warning << "\n";
  if (read.error) err << "memtrack: " << *read.error << "\n";
  ArtifactTrailer trailer = read.trailer.value_or(ArtifactTrailer{});
  // Written finalized, the copy still says its source was not.
  if (!read.trailer) trailer.counters["source_not_finalized"] = 1;
  writer.finish(std::move(trailer));
  return read.error || !read.warnings.empty() ? exit_status::kDamagedInput : exit_status::kOk;
}

}  // namespace memtrack
