#include "analyze/stack_resolver.h"

#include <deque>

namespace memtrack {
namespace {

// The code a process had mapped at one moment, from the recorded placements.
class PlacementCodeMap : public CodeMap {
 public:
  PlacementCodeMap(const ModuleMap& modules, ModuleCatalog& catalog, int32_t pid, uint64_t timestamp)
      : modules_(modules), catalog_(catalog), pid_(pid), timestamp_(timestamp) {}

  const CodeRange* find(uint64_t address) const override {
    for (const CodeRange& range : ranges_)
      if (range.start <= address && address < range.end) return &range;
    const Placement* placement = modules_.placement_at(pid_, address, timestamp_);
    if (!placement || !placement->mapping) return nullptr;
    uint32_t index = catalog_.index_of(placement->mapping, placement->start);
    ranges_.push_back(CodeRange{placement->start, placement->end, placement->mapping->file_offset,
                                catalog_.unwind_module(index)});
    return &ranges_.back();
  }

 private:
  const ModuleMap& modules_;
  ModuleCatalog& catalog_;
  int32_t pid_;
  uint64_t timestamp_;
  mutable std::deque<CodeRange> ranges_;  // stable addresses
};

StackOutcome outcome_of(UnwindStop stop) {
  switch (stop) {
    case UnwindStop::Complete: return StackOutcome::Complete;
    case UnwindStop::TruncatedCopy: return StackOutcome::TruncatedCopy;
    case UnwindStop::NoCfi: return StackOutcome::NoCfi;
    case UnwindStop::BadCfa: return StackOutcome::BadCfa;
    case UnwindStop::NoModule: return StackOutcome::NoModule;
    case UnwindStop::FrameLimit: return StackOutcome::FrameLimit;
  }
  return StackOutcome::BadCfa;
}

// A kernel walk that ended without a raw copy (the copy is only kept for
// walks that stopped short of the stack's end).
StackOutcome outcome_of(StackEnd end) {
  switch (end) {
    case StackEnd::Complete: return StackOutcome::Complete;
    case StackEnd::Truncated: return StackOutcome::TruncatedCopy;
    case StackEnd::FrameLimit: return StackOutcome::FrameLimit;
    case StackEnd::NoModule: return StackOutcome::NoModule;
    case StackEnd::NoRule:
    case StackEnd::Unsupported: return StackOutcome::NoCfi;
    case StackEnd::BadFrame: return StackOutcome::BadCfa;
    case StackEnd::NotWalked: return StackOutcome::TruncatedCopy;
  }
  return StackOutcome::BadCfa;
}

}  // namespace

ResolvedStack StackResolver::resolve(const Event& stack_event, const ModuleMap& modules, ModuleCatalog& catalog) {
  const StackDefinition& definition = *stack_event.stack;
  // A raw copy (with registers, or too few of them: the unwinder says so).
  if (!definition.bytes.empty()) return unwind_raw(stack_event, modules, catalog);
  ResolvedStack resolved;
  resolved.pid = stack_event.pid;
  resolved.timestamp = stack_event.timestamp;
  resolved.return_addresses = definition.chain;
  resolved.outcome = outcome_of(definition.end);
  return resolved;
}

ResolvedStack StackResolver::unwind_raw(const Event& stack_event, const ModuleMap& modules, ModuleCatalog& catalog) {
  PlacementCodeMap code(modules, catalog, stack_event.pid, stack_event.timestamp);
  const StackDefinition& definition = *stack_event.stack;
  const StackCopy copy(definition.sp, definition.bytes, definition.truncated);
  UnwoundStack unwound = unwinder_.unwind(definition.regs, code, unwind_cache_, copy);
  ResolvedStack resolved;
  resolved.pid = stack_event.pid;
  resolved.timestamp = stack_event.timestamp;
  resolved.outcome = outcome_of(unwound.stop);
  resolved.frame_pointer_fallback = unwound.frame_pointer_fallback;
  // No CFI because the file itself is missing here: say that instead.
  if (unwound.stop == UnwindStop::NoCfi) {
    if (const CodeRange* range = code.find(unwound.stop_address); range && range->module == nullptr)
      resolved.outcome = StackOutcome::MissingModule;
  }
  resolved.return_addresses = std::move(unwound.return_addresses);
  resolved.exact_pcs = std::move(unwound.exact_pcs);
  return resolved;
}

}  // namespace memtrack
