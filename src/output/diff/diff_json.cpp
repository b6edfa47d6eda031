// `memtrack diff` and `memtrack check` as one JSON object; the schema
// (format_version kDiffFormatVersion) is documented in docs/REPORT.md.
#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>

#include "output/diff/diff_output.h"
#include "output/json_values.h"

namespace memtrack {
namespace {

using nlohmann::json;

using json_values::or_null;

// {"base", "head", "change", "relative_percent"}: change a signed integer,
// relative_percent null when the base is 0 (or a side is unknown).
json change_json(const FigureChange& c) {
  json change = nullptr, relative = nullptr;
  if (c.base && c.head) {
    change = *c.head >= *c.base ? json(*c.head - *c.base) : json(-static_cast<int64_t>(*c.base - *c.head));
    auto percent = c.relative_percent();
    if (percent && !std::isinf(*percent)) relative = static_cast<double>(*percent);
  }
  return {{"base", or_null(c.base)}, {"head", or_null(c.head)}, {"change", change}, {"relative_percent", relative}};
}

json figures_json(const std::function<FigureChange(Figure)>& change_of, bool single) {
  json object = json::object();
  for (const FigureInfo& info : all_figures()) {
    FigureChange c = change_of(info.figure);
    object[info.name] = single ? or_null(c.head) : change_json(c);
  }
  return object;
}

json run_json(const std::string& file, const Report& report, const std::vector<std::string>& warnings) {
  return {{"file", file},
          {"command", report.header.command},
          {"artifact_format_version", report.header.format_version},
          {"recorder_version", report.header.recorder_version},
          {"start_realtime_ns", report.header.start_realtime_ns},
          {"lost_events", or_null(report.lost_events)},
          {"warnings", warnings}};
}

json process_json(const ProcessMatch& p, bool single) {
  auto side = [](const ProcessReport* r) -> json {
    if (!r) return nullptr;
    return {{"pid", r->pid}, {"command", r->command}, {"exe", r->exe}};
  };
  const char* matched_by = p.matched_by == ProcessMatch::MatchedBy::Command      ? "command"
                           : p.matched_by == ProcessMatch::MatchedBy::Executable ? "executable"
                                                                                 : nullptr;
  json object = {{"name", p.name},
                 {"depth", p.depth},
                 {"figures", figures_json([&](Figure f) { return p.change(f); }, single)}};
  if (single) {
    object["pid"] = p.head->pid;
    object["command"] = p.head->command;
  } else {
    object["matched_by"] = matched_by ? json(matched_by) : json(nullptr);
    object["base"] = side(p.base);
    object["head"] = side(p.head);
  }
  return object;
}

json site_json(const SiteDiff& s, CostKind by) {
  json frames = json::array();
  for (const DiffFrame& f : s.frames)
    frames.push_back(
        {{"label", f.label}, {"file", f.file}, {"line", f.line}, {"inlined", f.inlined}, {"module", f.module}});
  json key = json::array();
  for (const SiteKeyFrame& k : s.key) key.push_back({{"function", k.function}, {"file", k.file}, {"module", k.module}});
  const char* status = s.in_base() && s.in_head() ? "matched" : s.in_head() ? "new" : "gone";
  return {{"status", status},
          {"allocating_function", s.allocating_function},
          {"cost", change_json(s.change(by))},
          {"base", s.in_base() ? json_values::site_costs(s.base) : json(nullptr)},
          {"head", s.in_head() ? json_values::site_costs(s.head) : json(nullptr)},
          {"base_call_paths", s.base_sites},
          {"head_call_paths", s.head_sites},
          {"key", std::move(key)},
          {"frames", std::move(frames)}};
}

json sites_json(const DiffView& view) {
  const RecordingDiff& diff = *view.diff;
  const diff_format::SiteCounts counts = diff_format::site_counts(diff);
  json top = json::array();
  for (size_t index : diff.ranked_changes(view.by, view.top)) top.push_back(site_json(diff.sites[index], view.by));
  json totals = json::object();
  for (CostKind cost :
       {CostKind::Bytes, CostKind::Count, CostKind::Peak, CostKind::Leaked, CostKind::LiveAtEnd, CostKind::Temporary})
    totals[cost_kind_name(cost)] = change_json({cost_of(diff.base_site_totals, cost), cost_of(diff.head_site_totals, cost)});
  return {{"by", cost_kind_name(view.by)},
          {"matched", counts.matched},
          {"new", counts.added},
          {"gone", counts.gone},
          {"changed", diff.ranked_changes(view.by, 0).size()},
          {"totals", std::move(totals)},
          {"top", std::move(top)}};
}

json budget_json(const BudgetResult& r, bool single) {
  json violations = json::array();
  for (const BudgetViolation& v : r.violations) {
    json subject = v.process ? process_json(*v.process, single) : json("total");
    if (v.process) subject.erase("figures");
    violations.push_back({{"subject", std::move(subject)},
                          {"values", single ? or_null(v.values.head) : change_json(v.values)}});
  }
  return {{"expression", r.budget->text},
          {"kind", r.budget->kind == Budget::Kind::Max ? "max" : "fail-if"},
          {"figure", figure_info(r.budget->figure).name},
          {"status", r.broken ? "broken" : r.error.empty() ? "held" : "error"},
          {"error", r.error.empty() ? json(nullptr) : json(r.error)},
          {"violations", std::move(violations)}};
}

json diff_document(const DiffView& view) {
  const RecordingDiff& diff = *view.diff;
  const bool single = view.single();
  json budgets = json::array();
  for (const BudgetResult& r : view.budgets) budgets.push_back(budget_json(r, single));
  json processes = json::array();
  for (const ProcessMatch& p : diff.processes) processes.push_back(process_json(p, single));
  json document = {{"format_version", kDiffFormatVersion}, {"kind", single ? "check" : "diff"}};
  if (single) {
    document["recording"] = run_json(view.head_file, *diff.head, view.head_warnings);
  } else {
    document["base"] = run_json(view.base_file, *diff.base, view.base_warnings);
    document["head"] = run_json(view.head_file, *diff.head, view.head_warnings);
  }
  document["notes"] = diff.notes;
  document["budgets"] = std::move(budgets);
  document["broken_budgets"] = view.broken_budgets();
  document["totals"] = figures_json([&](Figure f) { return diff.total_change(f); }, single);
  document["processes"] = std::move(processes);
  document["sites"] = !single && diff.sites_compared ? sites_json(view) : json(nullptr);
  return document;
}

}  // namespace

void write_diff_json(const DiffView& view, std::ostream& out) {
  out << diff_document(view).dump(2, ' ', false, json::error_handler_t::replace) << '\n';
}

std::string compact_diff_json(const DiffView& view, size_t top) {
  DiffView listing = view;
  listing.top = top;
  return diff_document(listing).dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace memtrack
