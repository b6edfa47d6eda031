// A synthetic allocation trace shaped like a real program's, for measuring
// the artifact encoding: small size classes dominate, frees hit live blocks
// (mostly recent ones), and a slot allocator reuses freed addresses the way
// malloc does, so addresses repeat as they do in real recordings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "format/event.h"

namespace memtrack::bench {

// `count` events: ~48% allocations (1 in 20 Calloc), ~42% frees, ~10%
// reallocs; 95% of sizes from {16..512}, 5% from 4 KiB-1 MiB; 4 threads of
// one process; timestamps 50-2000 ns apart. Deterministic for a seed.
std::vector<Event> realistic_trace(size_t count, uint64_t seed);

// `stacks` raw Stack records, each followed by the Malloc that refers to it:
// definitions whose walk stopped short (no-rule) after 16 frames, with 2 KiB
// of random stack bytes (the worst case for compression) and 17 registers.
// One process, 4 threads; deterministic for a seed.
std::vector<Event> stack_trace(size_t stacks, uint64_t seed);

// The stack bytes a trace's Stack records carry in all.
uint64_t raw_stack_bytes(const std::vector<Event>& events);

}  // namespace memtrack::bench
