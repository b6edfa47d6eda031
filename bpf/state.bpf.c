/* The single definition of the maps and configuration in state.bpf.h. */
#define MT_DEFINE_STATE
#include "state.bpf.h"

const volatile __u8 empty_probes = 0;
const volatile __u8 per_process_attach = 1;
const volatile __u8 links_filter_process = 1;
const volatile __u8 child_stops_itself = 0;
const volatile __u8 ptrace_hold = 0;
const volatile __u64 wakeup_bytes = 256 * 1024;
const volatile __u64 pause_bytes = 1ULL << 62; /* set by the recorder from the ring size */
const volatile __u64 stack_pause_bytes = 1ULL << 62;
const volatile __u8 stack_mode = MT_STACKS_OFF;
const volatile __u32 stack_budget = 8192;
volatile __u64 pause_generation = 0;
volatile __u8 recording_ended = 0;
volatile __u8 rules_full = 0;

char LICENSE[] SEC("license") = "GPL";
