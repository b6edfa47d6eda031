#include "analyze/heap_replay.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "support/trace_builder.h"

namespace memtrack {
namespace {

using testing::process_of;
using testing::TraceBuilder;

constexpr int32_t kPid = 100;
constexpr int32_t kTid2 = 101;

TEST(HeapReplay, CountsCallsByKindAndBytes) {
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 100)
      .calloc(kPid, kPid, 0x2000, 200)
      .aligned_alloc(kPid, kPid, 0x3000, 64)
      .realloc(kPid, kPid, 0x1000, 0x4000, 36)
      .free(kPid, kPid, 0x2000)
      .free(kPid, kPid, 0x3000)
      .exit(kPid, 0);
  HeapFigures f = process_of(trace.report(), kPid).figures;
  EXPECT_EQ(f.calls, (CallsByKind{.malloc = 1, .calloc = 1, .realloc = 1, .aligned_alloc = 1}));
  EXPECT_EQ(f.alloc_calls(), 4u);
  EXPECT_EQ(f.free_calls, 2u);
  EXPECT_EQ(f.total_allocated, 400u);
  EXPECT_DOUBLE_EQ(f.average_allocation_size(), 100.0);
  EXPECT_EQ(f.unmatched_frees, 0u);
  EXPECT_EQ(f.leaked_bytes, 36u);  // the realloc'd block
  EXPECT_EQ(f.leaked_count, 1u);
}

TEST(HeapReplay, PeakIsTheMaximumAndKeepsTheTimeItWasFirstReached) {
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 100).malloc(kPid, kPid, 0x2000, 200);
  uint64_t peak_offset = trace.last_offset_ns();
  trace.free(kPid, kPid, 0x1000)
      .malloc(kPid, kPid, 0x3000, 50)  // 250: below the peak
      .malloc(kPid, kPid, 0x4000, 50)  // 300 again: the same peak, later
      .free(kPid, kPid, 0x4000);
  HeapFigures f = process_of(trace.report(), kPid).figures;
  EXPECT_EQ(f.peak_memory, 300u);
  EXPECT_EQ(f.peak_time_ns, peak_offset);
}

TEST(HeapReplay, PeakTimeIsAbsentWhenNothingWasEverLive) {
  TraceBuilder trace;
  trace.free(kPid, kPid, 0x1000).exit(kPid, 0);
  HeapFigures f = process_of(trace.report(), kPid).figures;
  EXPECT_EQ(f.peak_memory, 0u);
  EXPECT_FALSE(f.peak_time_ns.has_value());
}

TEST(HeapReplay, TemporaryWhenFreedBeforeTheNextAllocationOfTheSameThread) {
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 8).free(kPid, kPid, 0x1000);  // temporary
  trace.malloc(kPid, kPid, 0x2000, 8)
      .malloc(kPid, kPid, 0x3000, 8)
      .free(kPid, kPid, 0x2000)   // not: 0x3000 was allocated in between
      .free(kPid, kPid, 0x3000);  // temporary
  EXPECT_EQ(process_of(trace.report(), kPid).figures.temporary_allocations, 2u);
}

TEST(HeapReplay, OtherThreadsAllocationsDoNotBreakATemporary) {
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 8)
      .malloc(kPid, kTid2, 0x2000, 8)
      .free(kPid, kPid, 0x1000)    // temporary: thread kPid allocated nothing since
      .free(kPid, kTid2, 0x2000);  // temporary for kTid2 as well
  EXPECT_EQ(process_of(trace.report(), kPid).figures.temporary_allocations, 2u);
}

TEST(HeapReplay, AFreeFromAnotherThreadCanEndATemporary) {
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 8).free(kPid, kTid2, 0x1000);
  EXPECT_EQ(process_of(trace.report(), kPid).figures.temporary_allocations, 1u);
}

TEST(HeapReplay, ReallocCountsAsAnAllocationForTemporaries) {
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 8)
      .realloc(kPid, kPid, 0, 0x2000, 16)  // realloc(NULL, n) in between
      .free(kPid, kPid, 0x1000)            // so this is not temporary
      .realloc(kPid, kPid, 0x2000, 0x3000, 32)
      .free(kPid, kPid, 0x3000);  // the realloc result, freed at once: temporary
  EXPECT_EQ(process_of(trace.report(), kPid).figures.temporary_allocations, 1u);
}

TEST(HeapReplay, AFreedBlockIsTemporaryOnlyOnce) {
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 8)
      .free(kPid, kPid, 0x1000)
      .free(kPid, kPid, 0x1000);  // double free: unmatched, not a second temporary
  HeapFigures f = process_of(trace.report(), kPid).figures;
  EXPECT_EQ(f.temporary_allocations, 1u);
  EXPECT_EQ(f.unmatched_frees, 1u);
}

TEST(HeapReplay, LeaksAtExit) {
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 100)
      .malloc(kPid, kPid, 0x2000, 200)
      .malloc(kPid, kPid, 0x3000, 300)
      .free(kPid, kPid, 0x2000)
      .exit(kPid, 3 << 8);
  ProcessReport p = process_of(trace.report(), kPid);
  EXPECT_EQ(p.figures.leaked_bytes, 400u);
  EXPECT_EQ(p.figures.leaked_count, 2u);
  EXPECT_EQ(p.exit_code, 3 << 8);
  EXPECT_EQ(p.figures.duration_ns, 4 * TraceBuilder::kStepNs);
}

TEST(HeapReplay, ExecDiscardsTheOldImageBlocksAsItsLeaks) {
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 100)
      .malloc(kPid, kPid, 0x2000, 20)
      .free(kPid, kPid, 0x2000)
      .exec(kPid, {"/bin/worker", "-v"}, "/bin/worker", "worker")
      .free(kPid, kPid, 0x1000)  // the old image's block is gone: unmatched
      .malloc(kPid, kPid, 0x5000, 7)
      .free(kPid, kPid, 0x5000)
      .exit(kPid, 0);
  ProcessReport p = process_of(trace.report(), kPid);
  EXPECT_EQ(p.figures.leaked_bytes, 100u);
  EXPECT_EQ(p.figures.leaked_count, 1u);
  EXPECT_EQ(p.figures.unmatched_frees, 1u);
  EXPECT_EQ(p.command, "/bin/worker -v");
  EXPECT_EQ(p.exe, "/bin/worker");
  EXPECT_EQ(p.figures.peak_memory, 120u);
}

// The recording ended before the process: its blocks may still be freed.
TEST(HeapReplay, LiveBlocksOfRunningProcessesAreLiveAtEndNotLeaked) {
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 100).malloc(kPid, kPid, 0x2000, 1);
  ProcessReport p = process_of(trace.report(), kPid);
  EXPECT_EQ(p.figures.leaked_bytes, 0u);
  EXPECT_EQ(p.figures.leaked_count, 0u);
  EXPECT_EQ(p.figures.live_at_end_bytes, 101u);
  EXPECT_EQ(p.figures.live_at_end_count, 2u);
  EXPECT_TRUE(p.running_at_end);
  EXPECT_FALSE(p.exit_code.has_value());
}

// A process that exited leaks; one left behind (a daemon) is live at end
// (the sites: SiteCosts.LeaksAtExitAndExecLiveAtTheEndOfTrace).
TEST(HeapReplay, LeaksOnlyWhereTheAddressSpaceEndedInsideTheRecording) {
  constexpr int32_t kDaemon = 200;
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 100)
      .fork(kPid, kDaemon)
      .malloc(kDaemon, kDaemon, 0x2000, 200)
      .exec(kPid, {"/bin/next"})  // the old image's block leaked, the process runs on
      .malloc(kPid, kPid, 0x3000, 300)
      .exit(kPid, 0)
      .malloc(kDaemon, kDaemon, 0x4000, 400);
  Report report = trace.report();
  ProcessReport parent = process_of(report, kPid), daemon = process_of(report, kDaemon);
  EXPECT_EQ(parent.figures.leaked_bytes, 400u);
  EXPECT_EQ(parent.figures.live_at_end_bytes, 0u);
  EXPECT_FALSE(parent.running_at_end);
  EXPECT_EQ(daemon.figures.leaked_bytes, 0u);
  EXPECT_EQ(daemon.figures.live_at_end_bytes, 600u);
  EXPECT_EQ(daemon.figures.live_at_end_count, 2u);
  EXPECT_EQ(daemon.figures.inherited_unfreed_bytes, 100u);  // the parent's block, not the daemon's
  EXPECT_TRUE(daemon.running_at_end);
  EXPECT_EQ(report.running_at_end(), 1u);
  EXPECT_EQ(report.totals.leaked_bytes, 400u);
  EXPECT_EQ(report.totals.live_at_end_bytes, 600u);
}

// Attached to a running process: a free of a block it never saw allocated is
// of a block allocated before the recording, in the process found running
// and in a child it forks, until an exec gives a fresh address space.
TEST(HeapReplay, AttachedCountsFreesOfBlocksAllocatedBeforeApart) {
  constexpr int32_t kChild = 200, kFound = 300;
  TraceBuilder trace;
  trace.introduce(kPid)
      .introduce(kFound, kPid)  // a child found running too
      .free(kPid, kPid, 0xa000)
      .realloc(kPid, kPid, 0xb000, 0xc000, 10)
      .free(kFound, kFound, 0xa000)
      .fork(kPid, kChild)
      .free(kChild, kChild, 0xd000)
      .exec(kChild, {"/bin/fresh"})
      .free(kChild, kChild, 0xe000)  // the new image's: the recording saw it all
      .exit(kChild, 0);
  Report report = trace.report();
  EXPECT_TRUE(report.attached);
  ProcessReport attached = process_of(report, kPid), found = process_of(report, kFound),
                child = process_of(report, kChild);
  EXPECT_EQ(attached.figures.frees_of_earlier_blocks, 2u);
  EXPECT_EQ(attached.figures.unmatched_frees, 0u);
  EXPECT_EQ(found.figures.frees_of_earlier_blocks, 1u);
  EXPECT_EQ(found.figures.unmatched_frees, 0u);
  EXPECT_EQ(child.figures.frees_of_earlier_blocks, 1u);
  EXPECT_EQ(child.figures.unmatched_frees, 1u);
  EXPECT_EQ(report.totals.frees_of_earlier_blocks, 4u);
  EXPECT_EQ(report.totals.unmatched_frees, 1u);
  EXPECT_EQ(attached.figures.live_at_end_bytes, 10u);
  // The attached process ran on: the recording's exit is its, unknown.
  EXPECT_FALSE(report.exit_status.has_value());
}

// A command's processes are seen from their start: such a free is unmatched.
TEST(HeapReplay, UnattachedRecordingHasNoEarlierBlocks) {
  TraceBuilder trace;
  trace.exec(kPid, {"./app"}).free(kPid, kPid, 0xa000).exit(kPid, 0);
  Report report = trace.report();
  EXPECT_FALSE(report.attached);
  EXPECT_EQ(report.totals.unmatched_frees, 1u);
  EXPECT_EQ(report.totals.frees_of_earlier_blocks, 0u);
}

TEST(HeapReplay, AttachedRecordingsExitIsTheAttachedProcesss) {
  TraceBuilder trace;
  trace.introduce(kPid).malloc(kPid, kPid, 0x1000, 8).exit(kPid, 2 << 8);
  ArtifactTrailer trailer;
  trailer.exit_status = 0;  // the recorder's, not the process's
  Report report = trace.report(trailer);
  EXPECT_EQ(report.exit_status, 2 << 8);
  EXPECT_EQ(report.totals.leaked_bytes, 8u);
  EXPECT_EQ(report.running_at_end(), 0u);
}

TEST(HeapReplay, RecordingAttachedByFeatureOrByAnOlderHeadersCommand) {
  ArtifactHeader header = TraceBuilder::header();
  EXPECT_FALSE(recording_attached(header));
  header.features = {"alloc-events", "attached"};
  EXPECT_TRUE(recording_attached(header));
  header.features.clear();
  header.command = {"--pid", "123"};
  EXPECT_TRUE(recording_attached(header));
}

TEST(HeapReplay, ForkedChildInheritsTheParentsLiveBlocks) {
  constexpr int32_t kChild = 200;
  TraceBuilder trace;
  trace.exec(kPid, {"./server"})
      .malloc(kPid, kPid, 0x1000, 100)
      .malloc(kPid, kPid, 0x2000, 50)
      .fork(kPid, kChild);
  uint64_t fork_offset = trace.last_offset_ns();
  trace.free(kChild, kChild, 0x1000)  // a parent block, live in the child
      .malloc(kChild, kChild, 0x3000, 10)
      .exit(kChild, 0)
      .exit(kPid, 0);
  Report report = trace.report();
  ProcessReport child = process_of(report, kChild);
  EXPECT_EQ(child.parent_pid, kPid);
  EXPECT_EQ(child.command, "./server");
  EXPECT_EQ(child.figures.alloc_calls(), 1u);
  EXPECT_EQ(child.figures.total_allocated, 10u);
  EXPECT_EQ(child.figures.free_calls, 1u);
  EXPECT_EQ(child.figures.unmatched_frees, 0u);
  EXPECT_EQ(child.figures.peak_memory, 150u);
  EXPECT_EQ(child.figures.peak_time_ns, fork_offset);
  EXPECT_EQ(child.figures.leaked_bytes, 10u);
  EXPECT_EQ(child.figures.leaked_count, 1u);
  EXPECT_EQ(child.figures.inherited_unfreed_bytes, 50u);
  EXPECT_EQ(child.figures.inherited_unfreed_count, 1u);
  EXPECT_EQ(child.figures.temporary_allocations, 0u);

  ProcessReport parent = process_of(report, kPid);
  EXPECT_EQ(parent.figures.leaked_bytes, 150u);  // the child's free was in its own copy
  EXPECT_EQ(report.totals.peak_memory, 300u);
  EXPECT_EQ(report.totals.peak_time_ns, fork_offset);
}

TEST(HeapReplay, ExecAfterForkDropsTheInheritedBlocksWithoutLeaks) {
  constexpr int32_t kChild = 200;
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 100)
      .fork(kPid, kChild)
      .exec(kChild, {}, "/usr/bin/true", "true")
      .exit(kChild, 0);
  ProcessReport child = process_of(trace.report(), kChild);
  EXPECT_EQ(child.figures.leaked_bytes, 0u);
  EXPECT_EQ(child.figures.inherited_unfreed_bytes, 100u);
  EXPECT_EQ(child.command, "/usr/bin/true");  // no argv: the path
}

// docs/FORMAT.md §2.6: which way each process was recorded.
TEST(HeapReplay, RecordedByFollowsTheInterposedRecordsAcrossForkAndExec) {
  constexpr int32_t kChild = 200, kStaticChild = 300, kUprobes = 400;
  TraceBuilder trace;
  trace.exec(kPid, {"sh"})
      .malloc(kPid, kPid, 0x1000, 8)  // before its interposer was ready: still its image
      .interposed(kPid)
      .malloc(kPid, kPid, 0x2000, 8)
      .fork(kPid, kChild)                // inherits the interposer
      .malloc(kChild, kChild, 0x3000, 8)
      .fork(kPid, kStaticChild)
      .free(kStaticChild, kStaticChild, 0x2000)  // in the shell's copy, then a static executable
      .exec(kStaticChild, {"./static"})
      .malloc(kStaticChild, kStaticChild, 0x4000, 8)
      .fork(kPid, kUprobes)              // the shell's copy made no call before the exec
      .exec(kUprobes, {"./other"})
      .malloc(kUprobes, kUprobes, 0x5000, 8);
  Report report = trace.report();
  EXPECT_EQ(process_of(report, kPid).recorded_by, RecordedBy::Interposer);
  EXPECT_EQ(process_of(report, kChild).recorded_by, RecordedBy::Interposer);
  EXPECT_EQ(process_of(report, kStaticChild).recorded_by, RecordedBy::Both);
  EXPECT_EQ(process_of(report, kUprobes).recorded_by, RecordedBy::Uprobes);
}

TEST(HeapReplay, ProcessWithoutAllocatorCallsIsRecordedByItsLastImagesWay) {
  constexpr int32_t kChild = 200;
  TraceBuilder trace;
  trace.interposed(kPid).fork(kPid, kChild).exec(kChild, {"./quiet"}).exit(kChild, 0);
  Report report = trace.report();
  EXPECT_EQ(process_of(report, kPid).recorded_by, RecordedBy::Interposer);
  EXPECT_EQ(process_of(report, kChild).recorded_by, RecordedBy::Uprobes);
}

TEST(HeapReplay, CommandFallsBackToCommWithoutArgvOrPath) {
  TraceBuilder trace;
  trace.exec(kPid, {}, "", "kworker");
  EXPECT_EQ(process_of(trace.report(), kPid).command, "kworker");
}

TEST(HeapReplay, ChildOfAnUntracedParentStartsEmpty) {
  TraceBuilder trace;
  trace.fork(7, kPid).free(kPid, kPid, 0x1000);
  ProcessReport p = process_of(trace.report(), kPid);
  EXPECT_EQ(p.parent_pid, 7);
  EXPECT_EQ(p.figures.unmatched_frees, 1u);
  EXPECT_EQ(p.command, "");
}

TEST(HeapReplay, UnmatchedFrees) {
  TraceBuilder trace;
  trace.free(kPid, kPid, 0x1000)              // allocated before the recording
      .free(kPid, kPid, 0)                    // free(NULL): a no-op
      .realloc(kPid, kPid, 0x2000, 0x3000, 8)  // the old block is unknown too
      .free(kPid, kPid, 0x3000);
  HeapFigures f = process_of(trace.report(), kPid).figures;
  EXPECT_EQ(f.free_calls, 3u);
  EXPECT_EQ(f.unmatched_frees, 2u);
  EXPECT_EQ(f.leaked_bytes, 0u);
}

TEST(HeapReplay, ReallocOfNullIsAPlainAllocation) {
  TraceBuilder trace;
  trace.realloc(kPid, kPid, 0, 0x1000, 64).exit(kPid, 0);
  HeapFigures f = process_of(trace.report(), kPid).figures;
  EXPECT_EQ(f.calls.realloc, 1u);
  EXPECT_EQ(f.unmatched_frees, 0u);
  EXPECT_EQ(f.peak_memory, 64u);
  EXPECT_EQ(f.leaked_bytes, 64u);
}

// A realloc that failed (NULL for a non-zero size) leaves the old block
// allocated; a later free of it is matched and nothing leaks.
TEST(HeapReplay, FailedReallocKeepsTheOldBlock) {
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 64).realloc(kPid, kPid, 0x1000, 0, 1 << 20).free(kPid, kPid, 0x1000);
  HeapFigures f = process_of(trace.report(), kPid).figures;
  EXPECT_EQ(f.unmatched_frees, 0u);
  EXPECT_EQ(f.leaked_count, 0u);
  EXPECT_EQ(f.peak_memory, 64u);
}

TEST(HeapReplay, ReallocInPlaceReplacesTheSize) {
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 64).realloc(kPid, kPid, 0x1000, 0x1000, 16).exit(kPid, 0);
  HeapFigures f = process_of(trace.report(), kPid).figures;
  EXPECT_EQ(f.peak_memory, 64u);
  EXPECT_EQ(f.leaked_bytes, 16u);
  EXPECT_EQ(f.leaked_count, 1u);
}

TEST(HeapReplay, FailedAllocationCountsAsACallButAddsNoBlock) {
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0, 1 << 20);
  HeapFigures f = process_of(trace.report(), kPid).figures;
  EXPECT_EQ(f.alloc_calls(), 1u);
  EXPECT_EQ(f.total_allocated, 1u << 20);
  EXPECT_EQ(f.peak_memory, 0u);
  EXPECT_EQ(f.leaked_count, 0u);
}

TEST(HeapReplay, HistogramBucketsAtTheBoundaries) {
  TraceBuilder trace;
  for (uint64_t size : {0ull, 8ull, 9ull, 16ull, 17ull, 1ull << 30, (1ull << 30) + 1}) {
    trace.malloc(kPid, kPid, 0x1000, size).free(kPid, kPid, 0x1000);
  }
  SizeHistogram h = process_of(trace.report(), kPid).figures.histogram;
  EXPECT_EQ(h.count(0), 2u);  // 0 and 8
  EXPECT_EQ(h.count(1), 2u);  // 9 and 16
  EXPECT_EQ(h.count(2), 1u);  // 17
  EXPECT_EQ(h.count(SizeHistogram::kBucketCount - 2), 1u);  // exactly 1 GiB
  EXPECT_EQ(h.count(SizeHistogram::kBucketCount - 1), 1u);  // above 1 GiB
}

TEST(HeapReplay, TotalPeakIsTheMaximumOfTheSumOverProcesses) {
  constexpr int32_t kOther = 300;
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 100).malloc(kOther, kOther, 0x1000, 200);
  uint64_t both_live = trace.last_offset_ns();
  trace.free(kPid, kPid, 0x1000)
      .malloc(kOther, kOther, 0x2000, 50)  // kOther's own peak: 250, total 250
      .exit(kOther, 0)
      .malloc(kPid, kPid, 0x1000, 120);  // kPid's own peak: 120, and it runs on
  Report report = trace.report();
  EXPECT_EQ(process_of(report, kPid).figures.peak_memory, 120u);
  EXPECT_EQ(process_of(report, kOther).figures.peak_memory, 250u);
  EXPECT_EQ(report.totals.peak_memory, 300u);
  EXPECT_EQ(report.totals.peak_time_ns, both_live);
  EXPECT_EQ(report.totals.leaked_bytes, 250u);
  EXPECT_EQ(report.totals.leaked_count, 2u);
  EXPECT_EQ(report.totals.live_at_end_bytes, 120u);
  EXPECT_EQ(report.totals.live_at_end_count, 1u);
  EXPECT_EQ(report.totals.alloc_calls(), 4u);
  EXPECT_EQ(report.totals.threads, 2u);
}

TEST(HeapReplay, ThreadsAreDistinctTids) {
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 1)
      .malloc(kPid, kTid2, 0x2000, 1)
      .free(kPid, 102, 0x1000)
      .free(kPid, kTid2, 0x2000);
  EXPECT_EQ(process_of(trace.report(), kPid).figures.threads, 3u);
}

TEST(HeapReplay, AReusedPidAfterExitIsANewProcess) {
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 10).exit(kPid, 0).free(kPid, kPid, 0x1000);
  Report report = trace.report();
  ASSERT_EQ(report.processes.size(), 2u);
  EXPECT_EQ(report.processes[0].figures.leaked_bytes, 10u);
  EXPECT_EQ(report.processes[1].pid, kPid);
  EXPECT_EQ(report.processes[1].figures.unmatched_frees, 1u);
  EXPECT_EQ(report.processes[1].start_time_ns, trace.last_offset_ns());
}

TEST(HeapReplay, AForkOfARunningPidClosesTheOldIncarnation) {
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 10).fork(1, kPid).malloc(kPid, kPid, 0x2000, 5);
  Report report = trace.report();
  ASSERT_EQ(report.processes.size(), 2u);
  EXPECT_EQ(report.processes[0].figures.leaked_bytes, 10u);  // its pid was reused: it ended
  EXPECT_FALSE(report.processes[0].running_at_end);
  EXPECT_EQ(report.processes[1].figures.live_at_end_bytes, 5u);
  EXPECT_EQ(report.totals.peak_memory, 10u);  // the old incarnation's bytes left the total
}

TEST(HeapReplay, LossCountersAreSummedFromTheTrailer) {
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 1);
  ArtifactTrailer trailer;
  trailer.counters = {{"ring_lost", 3}, {"stack_dropped", 4}, {"events_written", 100},
                      {"lost_samples_total", 50}};
  trailer.exit_status = 9;
  Report report = trace.report(trailer, {"a reader warning"});
  EXPECT_EQ(report.lost_events, 7u);
  EXPECT_EQ(report.counters, trailer.counters);
  EXPECT_EQ(report.exit_status, 9);
  EXPECT_EQ(report.warnings, std::vector<std::string>{"a reader warning"});
}

TEST(HeapReplay, MissingTrailerLeavesLossesUnknownAndWarns) {
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 1);
  Report report = trace.report(std::nullopt, {"truncated tail"});
  EXPECT_FALSE(report.lost_events.has_value());
  EXPECT_FALSE(report.counters.has_value());
  EXPECT_FALSE(report.exit_status.has_value());
  ASSERT_EQ(report.warnings.size(), 2u);
  EXPECT_EQ(report.warnings[0], "truncated tail");
  EXPECT_NE(report.warnings[1].find("not finalized"), std::string::npos);
}

TEST(HeapReplay, TotalDurationRunsFromTheStartToTheTrailersEnd) {
  TraceBuilder trace;
  trace.malloc(kPid, kPid, 0x1000, 1);
  ArtifactTrailer trailer;
  trailer.end_monotonic_ns = TraceBuilder::kStartNs + 2'000'000'000;
  EXPECT_EQ(trace.report(trailer).totals.duration_ns, 2'000'000'000u);
  EXPECT_EQ(trace.report(std::nullopt).totals.duration_ns, trace.last_offset_ns());
}

TEST(HeapReplay, MemoryFollowsLiveBlocksNotEvents) {
  // Over 1M events of churn: 4 processes x 4 threads, each thread freeing its
  // allocation of kWindow rounds ago before allocating, so each keeps at most
  // kWindow blocks live. Every generation of processes exits with its blocks
  // live and the pids are reused.
  constexpr int kProcesses = 4;
  constexpr int kThreadsPerProcess = 4;
  constexpr uint64_t kWindow = 8;
  constexpr uint64_t kRoundsPerGeneration = 1000;
  constexpr uint64_t kBlockSize = 48;
  constexpr uint64_t kEventsTarget = 1'000'000;
  constexpr size_t kMaxLive = kProcesses * kThreadsPerProcess * kWindow;
  HeapReplay analyzer;
  uint64_t now = TraceBuilder::kStartNs;
  uint64_t events = 0;
  auto feed = [&](EventType type, int32_t pid, int32_t tid, uint64_t addr) {
    Event event;
    event.type = type;
    event.pid = pid;
    event.tid = tid;
    event.timestamp = ++now;
    event.addr = addr;
    event.size = type == EventType::Malloc ? kBlockSize : 0;
    analyzer.on_event(event);
    ++events;
  };
  size_t max_live_blocks = 0;
  uint64_t generations = 0;
  while (events < kEventsTarget) {
    for (uint64_t round = 0; round < kRoundsPerGeneration; ++round) {
      for (int32_t pid = 1000; pid < 1000 + kProcesses; ++pid) {
        for (int32_t tid = pid * 10; tid < pid * 10 + kThreadsPerProcess; ++tid) {
          uint64_t thread_base = static_cast<uint64_t>(tid) << 32;
          if (round >= kWindow) feed(EventType::Free, pid, tid, thread_base + round - kWindow);
          feed(EventType::Malloc, pid, tid, thread_base + round);
        }
      }
      max_live_blocks = std::max(max_live_blocks, analyzer.live_blocks());
    }
    for (int32_t pid = 1000; pid < 1000 + kProcesses; ++pid) feed(EventType::Exit, pid, pid, 0);
    ASSERT_EQ(analyzer.live_blocks(), 0u);
    ++generations;
  }
  EXPECT_EQ(max_live_blocks, kMaxLive);

  analyzer.finish();
  Report report = analyzer.build_report(TraceBuilder::header(), ArtifactTrailer{}, {});
  EXPECT_EQ(report.events, events);
  ASSERT_EQ(report.processes.size(), generations * kProcesses);
  EXPECT_EQ(report.totals.alloc_calls() + report.totals.free_calls + report.processes.size(),
            events);
  EXPECT_EQ(report.totals.peak_memory, kMaxLive * kBlockSize);
  EXPECT_EQ(report.totals.leaked_count, generations * kMaxLive);
  EXPECT_EQ(report.totals.unmatched_frees, 0u);
  EXPECT_EQ(report.totals.temporary_allocations, 0u);
}

}  // namespace
}  // namespace memtrack
