#include "analyze/heap_replay.h"

#include <algorithm>
#include <utility>

namespace memtrack {
namespace {

// Adds a process's figures to the totals; the peak and duration of the totals
// are whole-trace figures and are computed separately.
void add_process_figures(HeapFigures& totals, const HeapFigures& process) {
  totals.calls.malloc += process.calls.malloc;
  totals.calls.calloc += process.calls.calloc;
  totals.calls.realloc += process.calls.realloc;
  totals.calls.aligned_alloc += process.calls.aligned_alloc;
  totals.free_calls += process.free_calls;
  totals.unmatched_frees += process.unmatched_frees;
  totals.frees_of_earlier_blocks += process.frees_of_earlier_blocks;
  totals.total_allocated += process.total_allocated;
  totals.leaked_bytes += process.leaked_bytes;
  totals.leaked_count += process.leaked_count;
  totals.runtime_held_bytes += process.runtime_held_bytes;
  totals.runtime_held_count += process.runtime_held_count;
  totals.suppressed_leaked_bytes += process.suppressed_leaked_bytes;
  totals.suppressed_leaked_count += process.suppressed_leaked_count;
  totals.live_at_end_bytes += process.live_at_end_bytes;
  totals.live_at_end_count += process.live_at_end_count;
  totals.inherited_unfreed_bytes += process.inherited_unfreed_bytes;
  totals.inherited_unfreed_count += process.inherited_unfreed_count;
  totals.temporary_allocations += process.temporary_allocations;
  totals.histogram.merge(process.histogram);
  totals.threads += process.threads;
}

}  // namespace

bool EventFilter::selects(const Event& allocation, uint64_t start_monotonic_ns) const {
  if (!pids.empty() && std::find(pids.begin(), pids.end(), allocation.pid) == pids.end()) return false;
  if (!tids.empty() && std::find(tids.begin(), tids.end(), allocation.tid) == tids.end()) return false;
  uint64_t t = ns_since(allocation.timestamp, start_monotonic_ns);
  if (from_ns && t < *from_ns) return false;
  if (to_ns && t > *to_ns) return false;
  return true;
}

HeapReplay::HeapReplay(EventFilter filter, uint64_t start_monotonic_ns, std::optional<uint64_t> live_at_ns,
                       bool attached)
    : filter_(std::move(filter)), start_ns_(start_monotonic_ns), attached_(attached), live_at_ns_(live_at_ns) {}

void HeapReplay::on_event(const Event& event, SiteId site) {
  // Module mappings and stack definitions say nothing about the heap (they
  // serve unwinding), RSS and the program's own mappings are not the
  // allocators' (the timeline's); a process with nothing else is no heap to report.
  if (event.type == EventType::Mapping || event.type == EventType::Stack || is_memory_record(event.type)) return;
  ++events_;
  last_event_ns_ = std::max(last_event_ns_, event.timestamp);
  now_ = event.timestamp;
  if (live_at_ns_ && ns_since(event.timestamp, start_ns_) > *live_at_ns_) past_moment_ = true;
  Process* process = nullptr;
  if (event.type == EventType::Fork) {
    const Process* parent = find_running(event.parent_pid);
    process = &start_process(event.pid, event.timestamp);
    process->parent_pid = event.parent_pid;
    fork_from(*process, parent);
  } else {
    process = find_running(event.pid);
    if (process == nullptr) process = &start_process(event.pid, event.timestamp);
  }
  process->last_event_ns = event.timestamp;
  if (process->last_allocation_by_tid.try_emplace(event.tid, 0).second) ++process->figures.threads;
  switch (event.type) {
    case EventType::Malloc:
    case EventType::Calloc:
    case EventType::Realloc:
    case EventType::AlignedAlloc:
      allocate(*process, event, site);
      process->image_used_allocator = true;
      break;
    case EventType::Free:
      release(*process, event);
      process->image_used_allocator = true;
      break;
    case EventType::Interposed:
      process->image_interposed = true;
      break;
    case EventType::Exec:
      discard_address_space(*process);
      // A new image holds only what the recording sees, unless this Exec is
      // the recorder introducing a process it found running when attaching
      // (record/recorder.cpp: at the process's first moment, a Fork's for a
      // child); a real exec comes after its fork.
      if (event.timestamp != process->birth_ns) process->holds_earlier_blocks = false;
      process->image_interposed = false;
      if (event.image) set_image(*process, *event.image);
      break;
    case EventType::Exit:
      process->exit_code = event.exit_code;
      close(*process);
      running_.erase(event.pid);
      break;
    case EventType::Fork:  // handled above
    case EventType::Mapping:
    case EventType::Stack:
    case EventType::Rss:
    case EventType::Mmap:
    case EventType::Munmap:
    case EventType::Mremap:
    case EventType::Brk:
    case EventType::OwnMemory:
    case EventType::PythonCode:
      break;
  }
  HeapFigures& figures = process->figures;
  if (process->live_bytes() > figures.peak_memory) {
    figures.peak_memory = process->live_bytes();
    figures.peak_time_ns = event.timestamp;
  }
  if (total_live_bytes_ > total_peak_bytes_) {
    total_peak_bytes_ = total_live_bytes_;
    total_peak_ns_ = event.timestamp;
  }
}

HeapReplay::Process* HeapReplay::find_running(int32_t pid) {
  auto it = running_.find(pid);
  return it == running_.end() ? nullptr : it->second;
}

HeapReplay::Process& HeapReplay::start_process(int32_t pid, uint64_t birth_ns) {
  if (Process* previous = find_running(pid)) close(*previous);
  Process& process = processes_.emplace_back(pid, birth_ns);
  // Born without a Fork the recording saw: with an attach, it was running before.
  process.holds_earlier_blocks = attached_;
  running_[pid] = &process;
  return process;
}

void HeapReplay::fork_from(Process& child, const Process* parent) {
  if (parent == nullptr) return;  // the parent was not traced
  child.holds_earlier_blocks = parent->holds_earlier_blocks;
  child.command = parent->command;
  child.exe = parent->exe;
  child.image_interposed = parent->image_interposed;
  child.blocks = parent->blocks;
  child.blocks.for_each([](uint64_t, LiveBlock& block) { block.inherited = true; });
  child.inherited_live = {parent->live_bytes(), child.blocks.size()};
  total_live_bytes_ += child.inherited_live.bytes;
  child.figures.peak_memory = child.live_bytes();
  child.figures.peak_time_ns = child.birth_ns;
}

void HeapReplay::allocate(Process& process, const Event& event, SiteId site) {
  HeapFigures& figures = process.figures;
  switch (event.type) {
    case EventType::Malloc: ++figures.calls.malloc; break;
    case EventType::Calloc: ++figures.calls.calloc; break;
    case EventType::Realloc: ++figures.calls.realloc; break;
    default: ++figures.calls.aligned_alloc; break;  // the only other allocation type
  }
  figures.total_allocated += event.size;
  figures.histogram.add(event.size);
  // A realloc that failed (NULL for a non-zero size) left its old block as
  // it was; realloc(p, 0) returning NULL freed it.
  bool old_block_released = event.addr != 0 || event.size == 0;
  if (event.type == EventType::Realloc && event.old_addr != 0 && old_block_released &&
      !take_block(process, event.old_addr)) {
    count_unseen_free(process);
  }
  // A failed allocation (addr 0) still ends the thread's pending temporary.
  process.last_allocation_by_tid[event.tid] = event.addr;
  const bool selected = filter_.selects(event, start_ns_);
  if (selected) {
    SiteCosts& costs = costs_of(site);
    ++costs.allocations;
    costs.allocated_bytes += event.size;
  }
  if (event.addr == 0) return;
  const LiveBlock block{event.size, site, event.tid, false, selected};
  auto [live, added] = process.blocks.try_emplace(event.addr, block);
  if (!added) {
    // A block already live at this address lost its Free record; replace it.
    forget_block(process, *live);
    *live = block;
  }
  process.own_live.bytes += event.size;
  ++process.own_live.count;
  total_live_bytes_ += event.size;
  if (selected) {
    SiteLive& live = touch(site);
    live.bytes += event.size;
    ++live.count;
    site_live_bytes_ += event.size;
    after_site_change();
  }
}

void HeapReplay::release(Process& process, const Event& event) {
  ++process.figures.free_calls;
  if (event.addr == 0) return;  // free(NULL) is a no-op, not an unmatched free
  std::optional<LiveBlock> block = take_block(process, event.addr);
  if (!block) {
    count_unseen_free(process);
    return;
  }
  if (block->inherited) return;
  // Temporary: freed before its allocating thread allocated again.
  auto last = process.last_allocation_by_tid.find(block->allocating_tid);
  if (last != process.last_allocation_by_tid.end() && last->second == event.addr) {
    ++process.figures.temporary_allocations;
    last->second = 0;
    if (block->selected) {
      SiteCosts& costs = costs_of(block->site);
      ++costs.temporary_allocations;
      costs.temporary_bytes += block->size;
    }
  }
}

void HeapReplay::count_unseen_free(Process& process) {
  ++(process.holds_earlier_blocks ? process.figures.frees_of_earlier_blocks : process.figures.unmatched_frees);
}

std::optional<HeapReplay::LiveBlock> HeapReplay::take_block(Process& process, uint64_t addr) {
  const LiveBlock* live = process.blocks.find(addr);
  if (live == nullptr) return std::nullopt;
  LiveBlock block = *live;
  process.blocks.erase(addr);
  forget_block(process, block);
  return block;
}

void HeapReplay::forget_block(Process& process, const LiveBlock& block) {
  Tally& tally = block.inherited ? process.inherited_live : process.own_live;
  tally.bytes -= block.size;
  --tally.count;
  total_live_bytes_ -= block.size;
  if (block.selected && !block.inherited) {
    SiteLive& live = touch(block.site);
    live.bytes -= block.size;
    --live.count;
    site_live_bytes_ -= block.size;
    after_site_change();
  }
}

void HeapReplay::discard_address_space(Process& process, bool ended) {
  if (process.image_used_allocator)
    process.earlier_images_recorded_by |=
        static_cast<uint8_t>(process.image_interposed ? RecordedBy::Interposer : RecordedBy::Uprobes);
  process.image_used_allocator = false;
  HeapFigures& figures = process.figures;
  (ended ? figures.leaked_bytes : figures.live_at_end_bytes) += process.own_live.bytes;
  (ended ? figures.leaked_count : figures.live_at_end_count) += process.own_live.count;
  figures.inherited_unfreed_bytes += process.inherited_live.bytes;
  figures.inherited_unfreed_count += process.inherited_live.count;
  total_live_bytes_ -= process.live_bytes();
  process.blocks.for_each([&](uint64_t, const LiveBlock& block) {
    if (block.inherited) return;
    if (ended) {
      Tally& leaked = process.leaked_by_site[block.site];
      leaked.bytes += block.size;
      ++leaked.count;
    }
    if (!block.selected) return;
    SiteCosts& costs = costs_of(block.site);
    (ended ? costs.leaked_bytes : costs.live_at_end_bytes) += block.size;
    ++(ended ? costs.leaked_allocations : costs.live_at_end_allocations);
    SiteLive& live = touch(block.site);
    live.bytes -= block.size;
    --live.count;
    site_live_bytes_ -= block.size;
  });
  after_site_change();  // with a moment before it, what is live at the moment changed
  process.own_live = {};
  process.inherited_live = {};
  process.blocks.clear();
}

void HeapReplay::close(Process& process) {
  discard_address_space(process);
  std::unordered_map<int32_t, uint64_t>().swap(process.last_allocation_by_tid);
  process.ended = true;
}

void HeapReplay::set_image(Process& process, const ProcessImage& image) {
  if (!image.argv.empty()) {
    process.command.clear();
    for (const std::string& arg : image.argv) {
      if (!process.command.empty()) process.command += ' ';
      process.command += arg;
    }
  } else if (!image.path.empty()) {
    process.command = image.path;
  } else {
    process.command = image.comm;
  }
  process.exe = image.path;
}

SiteCosts& HeapReplay::costs_of(SiteId site) {
  if (site >= site_costs_.size()) {
    site_costs_.resize(site + 1);
    site_live_.resize(site + 1);
  }
  return site_costs_[site];
}

HeapReplay::SiteLive& HeapReplay::touch(SiteId site) {
  costs_of(site);  // grows both vectors
  SiteLive& live = site_live_[site];
  // Unchanged since the latest peak: what it holds now is its value then.
  if (live.changed <= site_peak_sequence_) {
    live.at_peak_bytes = live.bytes;
    live.at_peak_count = live.count;
  }
  live.changed = ++sequence_;
  return live;
}

void HeapReplay::after_site_change() {
  if (live_at_ns_) {
    // The moment's state is the latest one before it: the "peak" follows every change until then.
    if (past_moment_) return;
    site_peak_bytes_ = site_live_bytes_;
    site_peak_sequence_ = sequence_;
    return;
  }
  if (site_live_bytes_ <= site_peak_bytes_) return;
  site_peak_bytes_ = site_live_bytes_;
  site_peak_sequence_ = sequence_;
  site_peak_ns_ = now_;
}

void HeapReplay::finish() {
  if (finished_) return;
  finished_ = true;
  // Blocks of processes still running were live until the recording ended.
  if (live_at_ns_) past_moment_ = true;
  for (auto& [pid, process] : running_) discard_address_space(*process, false);
  for (size_t site = 0; site < site_live_.size(); ++site) {
    const SiteLive& live = site_live_[site];
    bool unchanged_since_peak = live.changed <= site_peak_sequence_;
    site_costs_[site].peak_bytes = unchanged_since_peak ? live.bytes : live.at_peak_bytes;
    site_costs_[site].peak_allocations = unchanged_since_peak ? live.count : live.at_peak_count;
  }
}

HeapReplay::Summary HeapReplay::summary() const {
  Summary summary{events_,         last_event_ns_, total_peak_bytes_, total_peak_ns_, site_peak_bytes_,
                  site_peak_ns_, site_costs_,    {}};
  summary.processes.reserve(processes_.size());
  for (const Process& process : processes_) {
    ProcessSummary& out = summary.processes.emplace_back();
    out.pid = process.pid;
    out.parent_pid = process.parent_pid;
    out.command = process.command;
    out.exe = process.exe;
    out.birth_ns = process.birth_ns;
    out.last_event_ns = process.last_event_ns;
    out.exit_code = process.exit_code;
    out.ended = process.ended;
    out.image_interposed = process.image_interposed;
    out.earlier_images_recorded_by = process.earlier_images_recorded_by;
    out.figures = process.figures;
    for (const auto& [site, tally] : process.leaked_by_site) out.leaked_by_site.push_back({site, tally.bytes, tally.count});
  }
  return summary;
}

HeapReplay::Summary HeapReplay::summary_if_ended_now() const {
  Summary summary = this->summary();
  if (finished_) return summary;
  // finish()'s discard_address_space(process, false) of each running
  // process, on the summary's copies.
  size_t index = 0;
  for (const Process& process : processes_) {
    ProcessSummary& out = summary.processes[index++];
    auto running = running_.find(process.pid);
    if (running == running_.end() || running->second != &process) continue;
    if (process.image_used_allocator)
      out.earlier_images_recorded_by |=
          static_cast<uint8_t>(process.image_interposed ? RecordedBy::Interposer : RecordedBy::Uprobes);
    out.figures.live_at_end_bytes += process.own_live.bytes;
    out.figures.live_at_end_count += process.own_live.count;
    out.figures.inherited_unfreed_bytes += process.inherited_live.bytes;
    out.figures.inherited_unfreed_count += process.inherited_live.count;
    process.blocks.for_each([&](uint64_t, const LiveBlock& block) {
      if (block.inherited || !block.selected) return;
      SiteCosts& costs = summary.site_costs[block.site];
      costs.live_at_end_bytes += block.size;
      ++costs.live_at_end_allocations;
    });
  }
  // finish()'s peaks: discarding only lowers what sites hold, and a site it
  // touches keeps the value it held at the peak, as the rule below gives
  // before the discard.
  for (size_t site = 0; site < site_live_.size(); ++site) {
    const SiteLive& live = site_live_[site];
    const bool unchanged_since_peak = live.changed <= site_peak_sequence_;
    summary.site_costs[site].peak_bytes = unchanged_since_peak ? live.bytes : live.at_peak_bytes;
    summary.site_costs[site].peak_allocations = unchanged_since_peak ? live.count : live.at_peak_count;
  }
  return summary;
}

HeapReplay HeapReplay::from_summary(const Summary& summary, const std::vector<SiteId>& site_map,
                                    uint64_t start_monotonic_ns, bool attached) {
  HeapReplay replay({}, start_monotonic_ns, std::nullopt, attached);
  replay.events_ = summary.events;
  replay.last_event_ns_ = summary.last_event_ns;
  replay.total_peak_bytes_ = summary.total_peak_bytes;
  replay.total_peak_ns_ = summary.total_peak_ns;
  replay.site_peak_bytes_ = summary.site_peak_bytes;
  replay.site_peak_ns_ = summary.site_peak_ns;
  auto renamed = [&](SiteId site) { return site < site_map.size() ? site_map[site] : site; };
  for (SiteId site = 0; site < summary.site_costs.size(); ++site)
    replay.costs_of(renamed(site)).add(summary.site_costs[site]);
  for (const ProcessSummary& in : summary.processes) {
    Process& process = replay.processes_.emplace_back(in.pid, in.birth_ns);
    process.parent_pid = in.parent_pid;
    process.command = in.command;
    process.exe = in.exe;
    process.last_event_ns = in.last_event_ns;
    process.exit_code = in.exit_code;
    process.ended = in.ended;
    process.image_interposed = in.image_interposed;
    process.earlier_images_recorded_by = in.earlier_images_recorded_by;
    process.figures = in.figures;
    for (const SiteTally& leaked : in.leaked_by_site) {
      Tally& tally = process.leaked_by_site[renamed(leaked.site)];
      tally.bytes += leaked.bytes;
      tally.count += leaked.count;
    }
  }
  replay.finished_ = true;
  return replay;
}

uint64_t HeapReplay::site_peak_time_ns() const {
  if (live_at_ns_) return *live_at_ns_;
  return site_peak_bytes_ == 0 ? 0 : ns_since(site_peak_ns_, start_ns_);
}

size_t HeapReplay::live_blocks() const {
  size_t blocks = 0;
  for (const auto& [pid, process] : running_) blocks += process->blocks.size();
  return blocks;
}

ProcessReport HeapReplay::to_report(const Process& process, uint64_t start_ns) {
  ProcessReport report;
  report.pid = process.pid;
  report.parent_pid = process.parent_pid;
  report.command = process.command;
  report.exe = process.exe;
  report.start_time_ns = ns_since(process.birth_ns, start_ns);
  report.exit_code = process.exit_code;
  report.running_at_end = !process.ended;
  // Every image has ended here (finish() discarded the running ones).
  uint8_t ways = process.earlier_images_recorded_by;
  if (ways == 0) ways = static_cast<uint8_t>(process.image_interposed ? RecordedBy::Interposer : RecordedBy::Uprobes);
  report.recorded_by = static_cast<RecordedBy>(ways);
  report.figures = process.figures;
  HeapFigures& figures = report.figures;
  if (figures.peak_memory == 0) {
    figures.peak_time_ns.reset();
  } else {
    figures.peak_time_ns = ns_since(*figures.peak_time_ns, start_ns);
  }
  figures.duration_ns = ns_since(process.last_event_ns, process.birth_ns);
  return report;
}

Report HeapReplay::build_report(const ArtifactHeader& header, const std::optional<ArtifactTrailer>& trailer,
                                std::vector<std::string> reader_warnings) const {
  Report report;
  report.header = header;
  report.events = events_;
  report.attached = attached_;
  report.warnings = std::move(reader_warnings);
  const uint64_t start_ns = header.start_monotonic_ns;

  report.processes.reserve(processes_.size());
  for (const Process& process : processes_) {
    report.processes.push_back(to_report(process, start_ns));
    add_process_figures(report.totals, report.processes.back().figures);
  }
  report.totals.peak_memory = total_peak_bytes_;
  if (total_peak_bytes_ > 0) report.totals.peak_time_ns = ns_since(total_peak_ns_, start_ns);

  uint64_t end_ns = last_event_ns_;
  if (trailer) {
    end_ns = std::max(end_ns, trailer->end_monotonic_ns);
    report.exit_status = trailer->exit_status;
    report.counters = trailer->counters;
    report.lost_events = sum_loss_counters(trailer->counters);
  } else {
    report.warnings.push_back("the recording was not finalized (no trailer): event losses are unknown");
  }
  // An attached recording ran no command: its exit is the attached process's,
  // when it ended inside the recording (the recorder introduces it first).
  if (attached_) report.exit_status = processes_.empty() ? std::nullopt : processes_.front().exit_code;
  report.totals.duration_ns = ns_since(end_ns, start_ns);
  return report;
}

void HeapReplay::exclude_leaks(Report& report, const std::vector<SiteId>& runtime_sites,
                               const std::vector<SiteId>& suppressed_sites) const {
  if (runtime_sites.empty() && suppressed_sites.empty()) return;
  auto take = [](const Process& process, const std::vector<SiteId>& sites, HeapFigures& figures, uint64_t& bytes,
                 uint64_t& count) {
    for (SiteId site : sites) {
      auto it = process.leaked_by_site.find(site);
      if (it == process.leaked_by_site.end()) continue;
      figures.leaked_bytes -= it->second.bytes;
      figures.leaked_count -= it->second.count;
      bytes += it->second.bytes;
      count += it->second.count;
    }
  };
  report.totals.leaked_bytes = report.totals.leaked_count = 0;
  for (size_t i = 0; i < processes_.size() && i < report.processes.size(); ++i) {
    HeapFigures& figures = report.processes[i].figures;
    take(processes_[i], runtime_sites, figures, figures.runtime_held_bytes, figures.runtime_held_count);
    take(processes_[i], suppressed_sites, figures, figures.suppressed_leaked_bytes, figures.suppressed_leaked_count);
    report.totals.leaked_bytes += figures.leaked_bytes;
    report.totals.leaked_count += figures.leaked_count;
    report.totals.runtime_held_bytes += figures.runtime_held_bytes;
    report.totals.runtime_held_count += figures.runtime_held_count;
    report.totals.suppressed_leaked_bytes += figures.suppressed_leaked_bytes;
    report.totals.suppressed_leaked_count += figures.suppressed_leaked_count;
  }
}

uint64_t HeapReplay::live_bytes_of(int32_t pid) const {
  auto it = running_.find(pid);
  return it == running_.end() ? 0 : it->second->live_bytes();
}

}  // namespace memtrack
