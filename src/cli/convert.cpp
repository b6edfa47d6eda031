#include "cli/convert.h"

#include <memory>
#include <optional>
#include <utility>

#include "cli/exit_status.h"

namespace memtrack {

int run_convert(const std::string& in, const std::string& out, ArtifactLayout layout, std::ostream& err) {
  ArtifactHeader header = read_artifact_header(in);
  header.format_version = kFormatVersion;  // the writer gives the layout's
  ArtifactWriter writer(out, header, {.layout = layout});
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
