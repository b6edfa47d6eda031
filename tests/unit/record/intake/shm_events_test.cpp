// InterposerChannel::drain (src/record/intake/shm_events.h): a chunk's events are
// drained up to the watermark and within the budget, the rest wait in the
// chunk, and a retired chunk is freed only once every event has been drained.
// The interposers' counters, in memory the command can write, are read as
// untrusted (shared_counters.h).
#include "record/intake/shm_events.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "record/intake/event_order.h"
#include "record/intake/shm_stacks.h"
#include "wire/shared_memory.h"
#include "wire/stack_table.h"

namespace memtrack {
namespace {

// The channel's file mapped a second time, as an interposer maps it.
class SharedChunk : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string path;
    for (const std::string& entry : channel_.environment_for_command({}))
      if (entry.starts_with(MT_SHM_ENV "=")) path = entry.substr(sizeof(MT_SHM_ENV));
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0) << path;
    base_ = mmap(nullptr, mt_shm_size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    ASSERT_NE(base_, MAP_FAILED);
    // Claimed as the interposer claims: the first free chunk, below chunks_used.
    chunk_ = mt_shm_chunk_at(base_, 0);
    __atomic_store_n(&chunk_->state, MT_CHUNK_OWNED, __ATOMIC_RELEASE);
    chunk_->pid = chunk_->tid = 4242;
    chunk_->claimed_ns = 5;
    static_cast<mt_shm_header*>(base_)->chunks_used = 1;
  }
  void TearDown() override {
    if (base_ && base_ != MAP_FAILED) munmap(base_, mt_shm_size());
  }
  void publish(uint64_t timestamp) {
    mt_alloc_event& e = chunk_->events[chunk_->head & (MT_SHM_CHUNK_EVENTS - 1)];
    e = {};
    e.timestamp = timestamp;
    e.pid = e.tid = 4242;
    e.addr = 0x1000 + timestamp;
    e.size = 16;
    e.kind = MT_MALLOC;
    __atomic_store_n(&chunk_->head, chunk_->head + 1, __ATOMIC_RELEASE);
  }
  std::vector<uint64_t> drained(uint64_t watermark, size_t budget = SIZE_MAX, uint64_t* drained_to = nullptr) {
    EventOrder order;
    uint64_t to = channel_.drain(order, watermark, budget);
    if (drained_to) *drained_to = to;
    std::vector<Event> batch;
    order.take(0, true, batch);
    std::vector<uint64_t> timestamps;
    for (const Event& e : batch) timestamps.push_back(e.timestamp);
    return timestamps;
  }

  // Stamped in ns, as the interposer stamps them without the TSC.
  InterposerChannel channel_{"", static_cast<uid_t>(-1), false};
  void* base_ = nullptr;
  mt_shm_chunk* chunk_ = nullptr;
};

TEST_F(SharedChunk, EventsPastTheWatermarkWaitInTheChunk) {
  for (uint64_t t : {10, 20, 30}) publish(t);
  EXPECT_EQ(drained(20), (std::vector<uint64_t>{10, 20}));
  EXPECT_EQ(chunk_->tail, 2u);
  publish(40);
  EXPECT_EQ(drained(UINT64_MAX), (std::vector<uint64_t>{30, 40}));
  EXPECT_EQ(chunk_->tail, 4u);
}

TEST_F(SharedChunk, ARetiredChunkIsFreedOnlyOnceDrained) {
  for (uint64_t t : {10, 20, 30}) publish(t);
  __atomic_store_n(&chunk_->state, MT_CHUNK_RETIRED, __ATOMIC_RELEASE);
  EXPECT_EQ(drained(20), (std::vector<uint64_t>{10, 20}));
  EXPECT_EQ(chunk_->state, MT_CHUNK_RETIRED) << "freed with an event left in it";
  EXPECT_EQ(drained(30), (std::vector<uint64_t>{30}));
  EXPECT_EQ(chunk_->state, MT_CHUNK_FREE);
}

TEST_F(SharedChunk, AGoneProcessChunkIsFreedOnceDrainedPastItsExit) {
  for (uint64_t t : {10, 20, 30}) publish(t);
  channel_.process_gone(4242, 35);
  EXPECT_EQ(drained(20), (std::vector<uint64_t>{10, 20}));
  EXPECT_EQ(chunk_->state, MT_CHUNK_OWNED);
  EXPECT_EQ(drained(40), (std::vector<uint64_t>{30}));
  EXPECT_EQ(chunk_->state, MT_CHUNK_FREE) << "the exit was forgotten before the chunk was drained";
}

// A thread claims a chunk (FREE -> OWNED) before it writes its pid and the
// claim's time there: the recorder may look in between. A process that
// exec'd (or a reused pid) is in the list of gone processes until a drain
// passes its exit; its new image's first claim, seen half written (the pid
// new, the time still the 0 of a free chunk), looked older than the exit:
// the chunk was freed under its new owner, whose events were then never
// drained (skipped as free) and who waited for room forever once it filled.
TEST_F(SharedChunk, AChunkBeingClaimedIsNotFreedAsAGoneProcessChunk) {
  __atomic_store_n(&chunk_->state, MT_CHUNK_FREE, __ATOMIC_RELEASE);
  chunk_->pid = chunk_->tid = 0;
  chunk_->claimed_ns = 0;
  channel_.process_gone(4242, 35);
  // Claimed, the pid written, the time not yet.
  __atomic_store_n(&chunk_->state, MT_CHUNK_OWNED, __ATOMIC_RELEASE);
  chunk_->pid = chunk_->tid = 4242;
  uint64_t drained_to = 0;
  EXPECT_EQ(drained(30, SIZE_MAX, &drained_to), (std::vector<uint64_t>{}));
  EXPECT_EQ(drained_to, 30u);
  EXPECT_EQ(chunk_->state, MT_CHUNK_OWNED) << "freed while its new owner was claiming it";
  chunk_->claimed_ns = 45;
  publish(50);
  EXPECT_EQ(drained(60), (std::vector<uint64_t>{50}));
  EXPECT_EQ(chunk_->state, MT_CHUNK_OWNED) << "the claim came after the exit";
}

// The poller drains no more than the writer has room for; what is stamped
// after the first event left behind must wait for it.
TEST_F(SharedChunk, TheBudgetLeavesEventsInTheChunkAndSaysUpToWhenAllWereDrained) {
  for (uint64_t t : {10, 20, 30, 40}) publish(t);
  uint64_t drained_to = 0;
  EXPECT_EQ(drained(35, 2, &drained_to), (std::vector<uint64_t>{10, 20}));
  EXPECT_EQ(drained_to, 29u) << "the event stamped 30 is still in the chunk";
  EXPECT_EQ(chunk_->tail, 2u);
  EXPECT_EQ(drained(35, 0, &drained_to), (std::vector<uint64_t>{}));
  EXPECT_EQ(drained_to, 29u);
  EXPECT_EQ(drained(35, 2, &drained_to), (std::vector<uint64_t>{30}));
  EXPECT_EQ(drained_to, 35u) << "what is left is past the watermark anyway";
  EXPECT_EQ(drained(UINT64_MAX, 5, &drained_to), (std::vector<uint64_t>{40}));
  EXPECT_EQ(drained_to, UINT64_MAX);
}

TEST_F(SharedChunk, AGoneProcessChunkLeftByTheBudgetIsStillFreedOnceDrained) {
  for (uint64_t t : {10, 20, 30}) publish(t);
  channel_.process_gone(4242, 35);
  EXPECT_EQ(drained(40, 2), (std::vector<uint64_t>{10, 20}));
  EXPECT_EQ(chunk_->state, MT_CHUNK_OWNED);
  EXPECT_EQ(drained(40, 2), (std::vector<uint64_t>{30}));
  EXPECT_EQ(chunk_->state, MT_CHUNK_FREE) << "the exit was forgotten while events were left in the chunk";
}

// Issue 29, item 7: a command that writes over its own $MEMTRACK_SHM file
// made the summary and trailer say "18446744073709551615 lost". A value no
// recording reaches is left out and counted; plausible ones are kept.
TEST_F(SharedChunk, CountersWrittenOverAreLeftOutAndCounted) {
  auto* header = static_cast<mt_shm_header*>(base_);
  header->full_waits = 3;
  header->calls_at_ready_lost = UINT64_MAX;
  header->arena_bytes = uint64_t{1} << 50;
  std::map<std::string, uint64_t> counters = channel_.counters();
  EXPECT_EQ(counters["interposer_full_waits"], 3u);
  EXPECT_FALSE(counters.contains("interposer_calls_at_ready_lost"));
  EXPECT_FALSE(counters.contains("interposer_arena_bytes"));
  EXPECT_EQ(counters["interposer_counters_implausible"], 2u);
  for (const auto& [name, value] : counters) EXPECT_LE(value, uint64_t{1} << 40) << name;

  header->calls_at_ready_lost = 7;
  header->arena_bytes = 4096;
  counters = channel_.counters();
  EXPECT_EQ(counters["interposer_calls_at_ready_lost"], 7u);
  EXPECT_EQ(counters["interposer_arena_bytes"], 4096u);
  EXPECT_EQ(counters["interposer_counters_implausible"], 0u);
}

// The same for the stack file ($MEMTRACK_SHM_STACKS, record --stacks).
TEST(SharedStacks, CountersWrittenOverAreLeftOutAndCounted) {
  InterposerStacks stacks(static_cast<uid_t>(-1), 8192);
  int fd = open(stacks.path().c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0) << stacks.path();
  void* base = mmap(nullptr, sizeof(mt_stacks_header), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT_NE(base, MAP_FAILED);
  auto* header = static_cast<mt_stacks_header*>(base);
  header->definitions = 12;
  header->definitions_lost = UINT64_MAX;
  std::map<std::string, uint64_t> counters = stacks.counters();
  munmap(base, sizeof(mt_stacks_header));
  EXPECT_EQ(counters["interposer_stack_definitions"], 12u);
  EXPECT_FALSE(counters.contains("interposer_stack_definitions_lost"));
  EXPECT_EQ(counters["interposer_stack_counters_implausible"], 1u);
}

// Each stack ring's header is a page of the file: reading the heads of all
// 512 at every drain made the kernel allocate and clear 2 MiB of /dev/shm at
// the first poll (~4 % of `record -- /bin/true`'s CPU) and cost 512 cache
// misses each time after. Only the rings of chunks claimed at some time
// (InterposerChannel::chunks_used()) are read.
TEST(SharedStacks, DrainReadsTheRingsOfTheChunksInUseOnly) {
  InterposerStacks stacks(static_cast<uid_t>(-1), 8192);
  auto blocks = [&] {
    struct stat st {};
    EXPECT_EQ(stat(stacks.path().c_str(), &st), 0);
    return st.st_blocks;
  };
  int fd = open(stacks.path().c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0) << stacks.path();
  void* base = mmap(nullptr, mt_stacks_size(MT_SHM_CHUNKS), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT_NE(base, MAP_FAILED);
  // A definition of 16 bytes in the ring of chunk 1, as an interposer writes it.
  mt_stack_ring* ring = mt_stacks_ring(base, 1);
  uint32_t length = 16;
  std::memcpy(ring->bytes, &length, sizeof(length));
  std::memset(ring->bytes + 8, 0x5a, length);
  __atomic_store_n(&ring->head, 8 + length, __ATOMIC_RELEASE);
  const auto written = blocks();
  std::vector<size_t> taken;
  auto take = [&](void*, size_t size) { taken.push_back(size); };
  stacks.drain(take, 1);  // chunk 0 only: ring 1 waits
  EXPECT_TRUE(taken.empty());
  stacks.drain(take, 2);
  EXPECT_EQ(taken, std::vector<size_t>{16});
  // Rings 0 and 1 read: at most their header pages more in the file.
  EXPECT_LE(blocks() - written, 2 * 4096 / 512) << "pages of rings never written were read";
  munmap(base, mt_stacks_size(MT_SHM_CHUNKS));
}

}  // namespace
}  // namespace memtrack
