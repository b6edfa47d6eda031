#include "output/folded_output.h"

#include "output/output.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "analyze/call_tree.h"
#include "output/utf8.h"

namespace memtrack {
namespace {

// ';' separates frames and a line break ends a record: neither may appear in
// a frame's text. Spaces may: readers take the value after the last space.
std::string sanitized(const std::string& raw) {
  std::string text = valid_utf8(raw);  // read as UTF-8 text by flame graph tools
  for (char& c : text) {
    if (c == ';')
      c = ':';
    else if (c == '\n' || c == '\r')
      c = ' ';
  }
  return text;
}

}  // namespace

extern const OutputFormat kFoldedOutput{
    .name = "folded",
    .summary = "folded stacks weighed by --by, for flamegraph.pl, inferno, speedscope",
    .noun = "folded stacks",
    .carries_notes = false,
    .write = [](const ReportModel& model, const OutputOptions& options, std::ostream& sink) {
      write_folded(model.profile, options.by, sink);
    }};

void write_folded(const Profile& profile, CostKind cost, std::ostream& out) {
  std::map<std::string, uint64_t> stacks;  // sorted: deterministic output
  for (const ProfileSite& site : profile.sites) {
    uint64_t value = cost_of(site.costs, cost);
    if (value == 0) continue;
    // A function's call sites merge, as in every flame graph.
    std::vector<std::string> frames = site_labels(profile, site, FrameNaming::Function);
    // Labels come innermost first; folded stacks start at the root.
    std::reverse(frames.begin(), frames.end());
    std::string text;
    for (size_t i = 0; i < frames.size(); ++i) {
      if (i > 0) text += ';';
      text += sanitized(frames[i]);
    }
    stacks[text] += value;
  }
  for (const auto& [text, value] : stacks) out << text << ' ' << value << '\n';
  out.flush();
  if (!out) throw std::runtime_error("folded output: writing failed");
}

}  // namespace memtrack
