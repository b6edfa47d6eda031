#include "record/intake/wire_events.h"

#include "wire/events.h"

namespace memtrack {

namespace {

bool alloc_type(uint32_t kind, EventType* type) {
  switch (kind) {
    case MT_MALLOC: *type = EventType::Malloc; return true;
    case MT_CALLOC: *type = EventType::Calloc; return true;
    case MT_REALLOC: *type = EventType::Realloc; return true;
    case MT_ALIGNED_ALLOC: *type = EventType::AlignedAlloc; return true;
    case MT_FREE: *type = EventType::Free; return true;
    default: return false;
  }
}

}  // namespace

bool event_from_wire(const mt_alloc_event& r, Event* e) {
  if (!alloc_type(r.kind, &e->type)) return false;
  e->pid = r.pid;
  e->tid = r.tid;
  e->timestamp = r.timestamp;
  e->addr = r.addr;
  e->size = r.size;
  e->old_addr = r.old_addr;
  e->stack_hash = r.stack_hash;
  return true;
}

}  // namespace memtrack
