#include "analyze/recording_diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include "analyze/call_tree.h"
#include "util/file_name.h"

namespace memtrack {
namespace {

constexpr std::array kFigures = {
    FigureInfo{Figure::AllocCalls, "alloc_calls", "allocation calls", false},
    FigureInfo{Figure::FreeCalls, "free_calls", "free calls", false},
    FigureInfo{Figure::Allocated, "allocated", "allocated", true},
    FigureInfo{Figure::Peak, "peak", "peak heap", true},
    FigureInfo{Figure::PeakRss, "peak_rss", "peak RSS", true},
    FigureInfo{Figure::Leaked, "leaked", "leaked", true},
    FigureInfo{Figure::LeakedBlocks, "leaked_blocks", "leaked blocks", false},
    FigureInfo{Figure::LiveAtEnd, "live_at_end", "live at end", true},
    FigureInfo{Figure::LiveAtEndBlocks, "live_at_end_blocks", "blocks live at end", false},
    FigureInfo{Figure::Temporary, "temporary", "temporary allocations", false},
};

// The command with argv[0] reduced to its file name: the same program built
// in two directories is the same command.
std::string command_key(const ProcessReport& process) {
  const std::string& command = process.command;
  size_t space = command.find(' ');
  if (space == std::string::npos) return std::string(file_name_of(command));
  return std::string(file_name_of(std::string_view(command).substr(0, space))) + command.substr(space);
}

std::string process_name(const ProcessReport& process) {
  if (!process.exe.empty()) return std::string(file_name_of(process.exe));
  return std::string(file_name_of(process.command.substr(0, process.command.find(' '))));
}

// Children of every process (indexes in report.processes, in start order);
// index processes.size() is the virtual root of processes without a
// recorded parent. A child's parent is the latest process started before it
// with the parent's pid (pids are reused).
std::vector<std::vector<size_t>> children_of(const Report& report) {
  const size_t n = report.processes.size();
  std::vector<std::vector<size_t>> children(n + 1);
  std::unordered_map<int32_t, size_t> latest;  // pid -> its latest process so far
  for (size_t i = 0; i < n; ++i) {
    size_t parent = n;
    if (const auto& ppid = report.processes[i].parent_pid) {
      auto it = latest.find(*ppid);
      if (it != latest.end()) parent = it->second;
    }
    children[parent].push_back(i);
    latest[report.processes[i].pid] = i;
  }
  return children;
}

// Walks both process trees depth first with an explicit stack (a chain of
// forks can be as deep as a recording likes), pairing the children of each
// matched pair.
class ProcessMatcher {
 public:
  ProcessMatcher(const Report* base, const Report* head)
      : base_(base), head_(head),
        base_children_(base ? children_of(*base) : std::vector<std::vector<size_t>>()),
        head_children_(children_of(*head)) {}

  std::vector<ProcessMatch> run() {
    std::optional<size_t> base_root;
    if (base_) base_root = base_->processes.size();
    expand(base_root, head_->processes.size(), 0);
    while (!stack_.empty()) {
      Task task = stack_.back();
      stack_.pop_back();
      const ProcessReport* base = task.base ? &base_->processes[*task.base] : nullptr;
      const ProcessReport* head = task.head ? &head_->processes[*task.head] : nullptr;
      ProcessMatch m{base, head, task.depth, task.matched_by, process_name(head ? *head : *base)};
      (head ? out_ : base_only_).push_back(std::move(m));
      expand(task.base, task.head, task.depth + 1);
    }
    for (ProcessMatch& m : base_only_) out_.push_back(std::move(m));
    return std::move(out_);
  }

 private:
  struct Task {
    std::optional<size_t> base, head;  // indexes in each run's processes
    size_t depth;
    ProcessMatch::MatchedBy matched_by;
  };

  // Pairs the children of a pair (either side may be absent: then every
  // child is unmatched) by command, then the rest by executable, each time
  // the k-th of a name in one run with the k-th of that name in the other;
  // pushes them so that the head's come off the stack in start order, then
  // the base's unmatched ones.
  void expand(std::optional<size_t> base_parent, std::optional<size_t> head_parent, size_t depth) {
    static const std::vector<size_t> none;
    const std::vector<size_t>& base_kids = base_parent ? base_children_[*base_parent] : none;
    const std::vector<size_t>& head_kids = head_parent ? head_children_[*head_parent] : none;
    std::vector<std::optional<size_t>> partner(head_kids.size());
    std::vector<ProcessMatch::MatchedBy> how(head_kids.size(), ProcessMatch::MatchedBy::Unmatched);
    std::vector<bool> base_taken(base_kids.size(), false);
    auto pass = [&](auto key_of, ProcessMatch::MatchedBy kind) {
      std::map<std::string, std::vector<size_t>> waiting;  // key -> untaken base children, in order
      for (size_t b = 0; b < base_kids.size(); ++b)
        if (!base_taken[b]) waiting[key_of(base_->processes[base_kids[b]])].push_back(b);
      std::map<std::string, size_t> used;
      for (size_t h = 0; h < head_kids.size(); ++h) {
        if (partner[h]) continue;
        std::string key = key_of(head_->processes[head_kids[h]]);
        auto it = waiting.find(key);
        if (it == waiting.end()) continue;
        size_t& next = used[key];
        if (next >= it->second.size()) continue;
        size_t b = it->second[next++];
        partner[h] = b;
        how[h] = kind;
        base_taken[b] = true;
      }
    };
    if (!base_kids.empty() && !head_kids.empty()) {
      pass(command_key, ProcessMatch::MatchedBy::Command);
      pass(process_name, ProcessMatch::MatchedBy::Executable);
    }
    std::vector<Task> tasks;
    for (size_t h = 0; h < head_kids.size(); ++h) {
      std::optional<size_t> base;
      if (partner[h]) base = base_kids[*partner[h]];
      tasks.push_back({base, head_kids[h], depth, how[h]});
    }
    for (size_t b = 0; b < base_kids.size(); ++b)
      if (!base_taken[b]) tasks.push_back({base_kids[b], std::nullopt, depth, ProcessMatch::MatchedBy::Unmatched});
    stack_.insert(stack_.end(), tasks.rbegin(), tasks.rend());
  }

  const Report* base_;
  const Report* head_;
  std::vector<std::vector<size_t>> base_children_, head_children_;
  std::vector<Task> stack_;
  std::vector<ProcessMatch> out_, base_only_;
};


std::vector<DiffFrame> display_frames(const Profile& profile, const ProfileSite& site) {
  std::vector<DiffFrame> frames;
  for (const SiteFrame& f : site_frames(profile, site)) {
    DiffFrame frame;
    frame.label = frame_label(profile, f, FrameNaming::CallSite);
    if (f.frame) {
      frame.file = f.frame->file;
      frame.line = f.frame->line;
      frame.inlined = f.frame->inlined;
    }
    if (f.location->module >= 0) frame.module = profile.modules[static_cast<size_t>(f.location->module)].path;
    frames.push_back(std::move(frame));
  }
  return frames;
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

std::string command_key_of_header(const ArtifactHeader& header) {
  if (header.command.empty()) return "";
  std::vector<std::string> command = header.command;
  command[0] = std::string(file_name_of(command[0]));
  return joined(command);
}

}  // namespace

bool has_call_paths(const Profile* profile) {
  if (!profile) return false;
  for (uint64_t count : profile->definitions_by_outcome)
    if (count > 0) return true;
  return false;
}

bool count_leaks_alike(Report& base, const Profile* base_profile, Report& head, const Profile* head_profile) {
  const bool base_paths = has_call_paths(base_profile), head_paths = has_call_paths(head_profile);
  if (base_paths == head_paths) return false;
  Report& with_paths = base_paths ? base : head;
  auto count_every_leak = [](HeapFigures& f) {
    f.leaked_bytes += f.runtime_held_bytes + f.suppressed_leaked_bytes;
    f.leaked_count += f.runtime_held_count + f.suppressed_leaked_count;
    f.runtime_held_bytes = f.runtime_held_count = f.suppressed_leaked_bytes = f.suppressed_leaked_count = 0;
  };
  count_every_leak(with_paths.totals);
  for (ProcessReport& process : with_paths.processes) count_every_leak(process.figures);
  return true;
}

std::span<const FigureInfo> all_figures() { return kFigures; }

const FigureInfo& figure_info(Figure figure) {
  for (const FigureInfo& info : kFigures)
    if (info.figure == figure) return info;
  throw std::logic_error("figure_info: unknown figure");
}

std::optional<uint64_t> figure_value(const HeapFigures& figures, Figure figure) {
  switch (figure) {
    case Figure::AllocCalls: return figures.alloc_calls();
    case Figure::FreeCalls: return figures.free_calls;
    case Figure::Allocated: return figures.total_allocated;
    case Figure::Peak: return figures.peak_memory;
    // From the Rss records (analyze/timeline.h); a recording without them
    // has none: outputs say "not recorded" and budgets on peak_rss cannot be
    // evaluated.
    case Figure::PeakRss: return figures.peak_rss;
    case Figure::Leaked: return figures.leaked_bytes;
    case Figure::LeakedBlocks: return figures.leaked_count;
    case Figure::LiveAtEnd: return figures.live_at_end_bytes;
    case Figure::LiveAtEndBlocks: return figures.live_at_end_count;
    case Figure::Temporary: return figures.temporary_allocations;
  }
  return std::nullopt;  // not reached: every figure is handled above
}

std::optional<long double> FigureChange::change() const {
  if (!base || !head) return std::nullopt;
  return static_cast<long double>(*head) - static_cast<long double>(*base);
}

std::optional<long double> FigureChange::relative_percent() const {
  auto delta = change();
  if (!delta) return std::nullopt;
  if (*base == 0) return *head == 0 ? 0.0L : std::numeric_limits<long double>::infinity();
  return 100.0L * *delta / static_cast<long double>(*base);
}

FigureChange ProcessMatch::change(Figure figure) const {
  // A process absent from a run counts zero there: a new process adds all
  // its figures, a vanished one removes them.
  auto value = [&](const ProcessReport* p) -> std::optional<uint64_t> {
    if (!p) return 0;
    return figure_value(p->figures, figure);
  };
  return {value(base), value(head)};
}

FigureChange SiteDiff::change(CostKind cost) const {
  return {cost_of(base, cost), cost_of(head, cost)};
}

FigureChange RecordingDiff::total_change(Figure figure) const {
  return {base ? figure_value(base->totals, figure) : std::nullopt, figure_value(head->totals, figure)};
}

std::vector<size_t> RecordingDiff::ranked_changes(CostKind cost, size_t top) const {
  std::vector<size_t> order;
  for (size_t i = 0; i < sites.size(); ++i)
    if (cost_of(sites[i].base, cost) != cost_of(sites[i].head, cost)) order.push_back(i);
  auto magnitude = [&](size_t i) {
    uint64_t b = cost_of(sites[i].base, cost), h = cost_of(sites[i].head, cost);
    return b > h ? b - h : h - b;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (magnitude(a) != magnitude(b)) return magnitude(a) > magnitude(b);
    return cost_of(sites[a].head, cost) > cost_of(sites[b].head, cost);
  });
  if (top != 0 && order.size() > top) order.resize(top);
  return order;
}

std::vector<SiteKeyFrame> site_key(const Profile& profile, const ProfileSite& site) {
  std::vector<SiteKeyFrame> key;
  for (const SiteFrame& f : site_frames(profile, site)) {
    SiteKeyFrame k;
    if (f.frame) {
      k.function = f.frame->function;
      k.file = file_name_of(f.frame->file);
    }
    if (f.location->module >= 0) k.module = file_name_of(profile.modules[static_cast<size_t>(f.location->module)].path);
    key.push_back(std::move(k));
  }
  return key;
}

std::vector<ProcessMatch> process_tree(const Report& report) { return ProcessMatcher(nullptr, &report).run(); }

RecordingDiff diff_recordings(const Report& base, const Profile* base_profile, const Report& head,
                              const Profile* head_profile) {
  RecordingDiff diff;
  diff.base = &base;
  diff.head = &head;
  diff.processes = ProcessMatcher(&base, &head).run();

  if (command_key_of_header(base.header) != command_key_of_header(head.header)) {
    diff.commands_note = diff.notes.size();
    diff.notes.push_back(fmt::format("the recordings ran different commands: base \"{}\", head \"{}\"",
                                     joined(base.header.command), joined(head.header.command)));
  }
  if (base.header.format_version != head.header.format_version)
    diff.notes.push_back(fmt::format("the recordings have different artifact format versions: base {}, head {}",
                                     base.header.format_version, head.header.format_version));
  const bool base_paths = has_call_paths(base_profile), head_paths = has_call_paths(head_profile);
  if (!base_paths || !head_paths) {
    const char* which = !base_paths && !head_paths ? "neither recording has" : !base_paths ? "the base has no" : "the head has no";
    diff.notes.push_back(fmt::format("{} call paths (recorded with --no-stacks): allocation sites are not compared, "
                                     "the totals are",
                                     which));
    return diff;
  }

  diff.sites_compared = true;
  diff.base_site_totals = base_profile->totals;
  diff.head_site_totals = head_profile->totals;
  std::map<std::vector<SiteKeyFrame>, size_t> index_of;
  std::vector<uint64_t> shown_bytes;  // allocated bytes of the site whose frames a group shows
  // The head first, so each group shows the head's frames when it has them.
  for (const auto& [profile, in_head] : {std::pair{head_profile, true}, std::pair{base_profile, false}}) {
    for (const ProfileSite& site : profile->sites) {
      std::vector<SiteKeyFrame> key = site_key(*profile, site);
      auto [it, added] = index_of.try_emplace(key, diff.sites.size());
      if (added) {
        diff.sites.push_back({std::move(key), {}, {}, 0, 0, {}, {}});
        shown_bytes.push_back(0);
      }
      SiteDiff& group = diff.sites[it->second];
      SiteCosts& costs = in_head ? group.head : group.base;
      size_t& members = in_head ? group.head_sites : group.base_sites;
      // Frames of the costliest member (by bytes) of the first run that has it.
      const bool first_of_run = members == 0;
      const bool shows_this_run = in_head || group.head_sites == 0;
      if (shows_this_run && (first_of_run || site.costs.allocated_bytes > shown_bytes[it->second])) {
        group.frames = display_frames(*profile, site);
        group.allocating_function = allocating_function(*profile, site);
        shown_bytes[it->second] = site.costs.allocated_bytes;
      }
      costs.add(site.costs);
      ++members;
    }
  }
  return diff;
}

}  // namespace memtrack
