// `memtrack record`: runs (or attaches to) a process tree and writes its
// allocation events into an artifact.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "format/artifact.h"
#include "record/snapshots.h"

namespace memtrack {

// How call paths are taken: walked with unwind rules at each allocation,
// kept as raw stack bytes for the offline unwinder, or not at all.
enum class StackMode { Walk, Raw, Off };
// How tasks are held while memtrack works on them: SIGSTOP (a job-control
// stop the command's processes can see), or a tracer thread keeping them in
// ptrace stops nobody else sees (record/process/ptrace_hold.h).
enum class HoldMode { Signal, Ptrace };

struct RecordOptions {
  std::string output;                // artifact path; empty: memtrack.<prog>.<pid>.zst
  std::vector<std::string> command;  // run this command, or:
  pid_t attach_pid = 0;              // attach to this running process tree
  double duration_s = 0;             // --pid: stop after this long (0: until it exits)
  unsigned encode_workers = 0;       // 0: one per 7 cores
  uint64_t event_ring_bytes = 0;     // 0: by the path (record/probes/bpf_session.h, RingSizes)
  uint64_t stack_ring_bytes = 0;     // the kernel's call-path definitions; 0: by the path
  bool empty_probes = false;         // benchmark floor: probes attached but empty
  bool classic_uprobes = false;      // one perf uprobe per site (chosen anyway before Linux 6.13)
  bool global_probes = false;        // probes for every process, filtered in BPF
  StackMode stack_mode = StackMode::Walk;
  uint32_t stack_budget = 8192;      // bytes of stack copied per allocation
  // Rss records and the mappings the program makes outside the allocators.
  bool memory_records = true;
  uint64_t rss_step_bytes = 256 * 1024;  // an RSS change this big is recorded at once
  bool rss_sampling = false;             // sample /proc/PID/statm instead of the rss_stat hook
  // At the end, a Module record per mapped file (what export-modules needs),
  // so that the artifact can be exported on another machine.
  bool embed_modules = false;
  // How allocation records are written (format/artifact.h).
  ArtifactLayout layout = ArtifactLayout::Compact;
  // Every allocator call through the uprobes. By default the interposer
  // fast path (src/interpose/) records the allocator calls of dynamically
  // linked processes in-process, without a kernel entry per call, and the
  // uprobes the rest; --pid, --stack-mode raw, --global-probes and
  // --empty-probes always use the uprobes.
  bool uprobes = false;
  // With call paths, files' prepared unwind rules are kept across recordings
  // (record/unwind_rules/rule_cache.h).
  bool unwind_cache = true;
  bool quiet = false;
  HoldMode hold = HoldMode::Signal;
  // Warn at start when one intercepted allocator call costs at least this
  // many ns (probe_cost.h): ~2.7x the 0.74 us floor of a machine where
  // recording is comfortable.
  uint64_t probe_cost_warning_ns = 2000;
  // Snapshots of the live heap while recording (record/snapshots.h); SIGUSR1
  // asks for one whatever these say.
  SnapshotOptions snapshots;
  // record --aggregate: the aggregator the writer feeds every record
  // (format/artifact.h, EventAggregator), made for the recording's header;
  // empty: every record is written.
  std::function<std::shared_ptr<EventAggregator>(const ArtifactHeader&)> aggregator;
  // With an aggregator: how often its figures so far are kept in
  // OUTPUT.checkpoint (WriterOptions::checkpoint_interval); 0: never.
  double checkpoint_every_s = 10;
};

// Runs the recorder under a guardian process (record/process/guardian.h) and returns
// memtrack's exit code: the command's (128 + signal when killed), even when
// the recording failed; with --pid, 0, or 1 when the artifact could not be
// completely written. Throws std::runtime_error on set-up failures.
int record(const RecordOptions& options);

}  // namespace memtrack
