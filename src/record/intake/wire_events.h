// The recorder's reading of the allocator records of the wire
// (wire/events.h, struct mt_alloc_event): the same records come from the
// kernel's event ring (ring_poller.cpp) and the interposer's chunks
// (shm_events.cpp).
#pragma once

#include "format/event.h"

struct mt_alloc_event;

namespace memtrack {

// The event of one allocator record of the kernel or the interposer; false
// for an unknown kind.
bool event_from_wire(const mt_alloc_event& record, Event* event);

}  // namespace memtrack
