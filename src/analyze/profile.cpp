#include "analyze/profile.h"

namespace memtrack {

const char* stack_outcome_name(StackOutcome outcome) {
  switch (outcome) {
    case StackOutcome::Complete: return "complete";
    case StackOutcome::TruncatedCopy: return "truncated-copy";
    case StackOutcome::NoCfi: return "no-cfi";
    case StackOutcome::BadCfa: return "bad-cfa";
    case StackOutcome::NoModule: return "no-module";
    case StackOutcome::FrameLimit: return "frame-limit";
    case StackOutcome::MissingModule: return "missing-module";
    case StackOutcome::NoStack: return "no-stack";
    case StackOutcome::Undefined: return "undefined";
  }
  return "?";
}

void SiteCosts::add(const SiteCosts& other) {
  allocations += other.allocations;
  allocated_bytes += other.allocated_bytes;
  peak_bytes += other.peak_bytes;
  peak_allocations += other.peak_allocations;
  leaked_bytes += other.leaked_bytes;
  leaked_allocations += other.leaked_allocations;
  live_at_end_bytes += other.live_at_end_bytes;
  live_at_end_allocations += other.live_at_end_allocations;
  temporary_allocations += other.temporary_allocations;
  temporary_bytes += other.temporary_bytes;
}

}  // namespace memtrack
