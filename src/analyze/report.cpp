#include "analyze/report.h"

#include <algorithm>

namespace memtrack {

double HeapFigures::average_allocation_size() const {
  uint64_t calls_total = alloc_calls();
  if (calls_total == 0) return 0.0;
  return static_cast<double>(total_allocated) / static_cast<double>(calls_total);
}

std::string_view recorded_by_name(RecordedBy way) {
  switch (way) {
    case RecordedBy::Uprobes: return "uprobes";
    case RecordedBy::Interposer: return "interposer";
    case RecordedBy::Both: return "both";
  }
  return "uprobes";
}

size_t Report::running_at_end() const {
  return static_cast<size_t>(
      std::count_if(processes.begin(), processes.end(), [](const ProcessReport& p) { return p.running_at_end; }));
}

bool recording_attached(const ArtifactHeader& header) {
  const std::vector<std::string>& features = header.features;
  if (std::find(features.begin(), features.end(), "attached") != features.end()) return true;
  return !header.command.empty() && header.command.front() == "--pid";
}

bool is_loss_counter(std::string_view name) {
  return name.ends_with("_lost") || name.ends_with("_dropped");
}

uint64_t sum_loss_counters(const std::map<std::string, uint64_t>& counters) {
  uint64_t sum = 0;
  for (const auto& [name, value] : counters) {
    // Saturating: counters from a damaged or forged file must not wrap
    // around to a small loss.
    if (is_loss_counter(name) && __builtin_add_overflow(sum, value, &sum)) return UINT64_MAX;
  }
  return sum;
}

}  // namespace memtrack
