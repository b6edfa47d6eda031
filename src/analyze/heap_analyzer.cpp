#include "analyze/heap_analyzer.h"

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
  totals.total_allocated += process.total_allocated;
  totals.leaked_bytes += process.leaked_bytes;
  totals.leaked_count += process.leaked_count;
  totals.inherited_unfreed_bytes += process.inherited_unfreed_bytes;
  totals.inherited_unfreed_count += process.inherited_unfreed_count;
  totals.temporary_allocations += process.temporary_allocations;
  totals.histogram.merge(process.histogram);
  totals.threads += process.threads;
}

}  // namespace

void HeapAnalyzer::on_event(const Event& event) {
  // Module mappings and stack definitions say nothing about the heap (they
  // serve unwinding); a process with nothing else is no heap to report.
  if (event.type == EventType::Mapping || event.type == EventType::Stack || is_memory_record(event.type)) return;
  ++events_;
  last_event_ns_ = std::max(last_event_ns_, event.timestamp);
  ProcessHeap* process = nullptr;
  if (event.type == EventType::Fork) {
    const ProcessHeap* parent = find_running(event.parent_pid);
    process = &start_process(event.pid, event.timestamp);
    process->fork_from(event.parent_pid, parent);
    total_live_bytes_ += process->live_bytes();
  } else {
    process = find_running(event.pid);
    if (process == nullptr) process = &start_process(event.pid, event.timestamp);
  }
  uint64_t live_before = process->live_bytes();
  process->on_event(event);
  total_live_bytes_ = total_live_bytes_ - live_before + process->live_bytes();
  if (process->ended()) running_.erase(event.pid);
  if (total_live_bytes_ > total_peak_bytes_) {
    total_peak_bytes_ = total_live_bytes_;
    total_peak_ns_ = event.timestamp;
  }
}

ProcessHeap* HeapAnalyzer::find_running(int32_t pid) {
  auto it = running_.find(pid);
  return it == running_.end() ? nullptr : it->second;
}

ProcessHeap& HeapAnalyzer::start_process(int32_t pid, uint64_t birth_ns) {
  if (ProcessHeap* previous = find_running(pid)) {
    total_live_bytes_ -= previous->live_bytes();
    previous->close();
  }
  ProcessHeap& process = processes_.emplace_back(pid, birth_ns);
  running_[pid] = &process;
  return process;
}

size_t HeapAnalyzer::live_blocks() const {
  size_t blocks = 0;
  for (const auto& [pid, process] : running_) blocks += process->live_blocks();
  return blocks;
}

Report HeapAnalyzer::build_report(const ArtifactHeader& header,
                                  const std::optional<ArtifactTrailer>& trailer,
                                  std::vector<std::string> reader_warnings) const {
  Report report;
  report.header = header;
  report.events = events_;
  report.warnings = std::move(reader_warnings);
  const uint64_t start_ns = header.start_monotonic_ns;

  report.processes.reserve(processes_.size());
  for (const ProcessHeap& process : processes_) {
    report.processes.push_back(process.to_report(start_ns));
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
    report.warnings.push_back(
        "the recording was not finalized (no trailer): event losses are unknown");
  }
  report.totals.duration_ns = ns_since(end_ns, start_ns);
  return report;
}

uint64_t HeapAnalyzer::live_bytes_of(int32_t pid) const {
  auto it = running_.find(pid);
  return it == running_.end() ? 0 : it->second->live_bytes();
}

}  // namespace memtrack
