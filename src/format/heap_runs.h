// The compact layout of allocation records (format_version 3; docs/FORMAT.md
// §2.7): a run of consecutive Malloc, Calloc, Realloc, AlignedAlloc and Free
// events is written as one Heap record of columns rather than a map per
// event, which is what makes an artifact as small as heaptrack's file.
//
//   kinds    a byte per event: its type, and what its address parts are
//   ticks    per event, the time since the previous one, in ticks (zigzag)
//   threads  per event, its (pid, tid) as an index into the frame's threads
//   sites    per allocation, its (size, call path) as an index into the
//            frame's sites
//   refs     per block a free names (and realloc's old block, and a block
//            reused): how many live blocks of its site are newer (its
//            rank, 0 = the newest), or how many blocks the recording
//            numbered after it (when its rank is out of reach)
//   addresses the address of a freed block the writer never saw allocated
//
// The rules (the contract the reader's figures rest on):
// - No addresses: every block the program allocates gets the next number
//   (`first_block` says the run's first), and a free names its block by its
//   site and its rank among the site's live blocks (programs mostly free
//   what they allocated last: rank 0 or 1), or, beyond kRankReach, by
//   number. Writer and reader keep each site's live blocks alike (SiteOrder). The reader hands the analysis the number (kBlockKeyBit | number)
//   as the block's address: the analysis only compares addresses, so every
//   figure is the same as with the real ones.
// - The writer numbers blocks by address exactly as HeapReplay keeps them
//   live (analyze/heap_replay.h): a process's blocks are copied to its child
//   at Fork and forgotten at Exec and Exit; a failed allocation (address 0)
//   gets no number; a failed realloc keeps its old block; an allocation at an
//   address still live reuses that block's number (HeapReplay replaces the
//   block there, as it would at the address).
// - No stack hashes: the compact layout numbers each distinct call-path hash
//   in order of first use (1, 2, ...; 0 stays "no call path") and writes the
//   number wherever the hash was, in Stack records and sites alike. The
//   analysis only compares hashes, and 64 random bits a path do not compress.
// - Times are rounded down to the run's tick (`tick_ns`, 10 µs): the other
//   records keep their nanoseconds.
// - The frame's tables (threads, sites) start empty in every frame and grow
//   by each run's `new_threads` and `new_sites`: a frame reads alone. Block
//   numbers cross frames: a free whose block was in a lost frame is read as
//   a free of an address never seen (an unmatched free), as before.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/node_hash_map.h>

#include "format/artifact.h"
#include "format/event.h"

namespace memtrack::records {

class ByteBuffer;

// A freed address the writer never saw allocated that has the top bit set
// (free() of garbage) is read with this bit set too, so that it cannot be
// taken for a block number (numbers stay below it).
inline constexpr uint64_t kForeignHighBit = uint64_t{1} << 62;
inline constexpr uint64_t kHeapTickNs = 10'000;

// A kinds byte: the EventType in the low 3 bits, then flags.
namespace heap_kind {
inline constexpr uint8_t kTypeMask = 0x07;
// Free, or Realloc's old block: absent (free(NULL), realloc(NULL, n)).
inline constexpr uint8_t kNoOldBlock = 0x08;
// Free, or Realloc's old block: an address never seen allocated (in addresses).
inline constexpr uint8_t kForeignOldBlock = 0x10;
// An allocation that failed: no block.
inline constexpr uint8_t kFailed = 0x20;
// An allocation at an address still live: the block keeps its number (in refs).
inline constexpr uint8_t kReusedBlock = 0x40;
}  // namespace heap_kind

// A site: (size, call-path number).
using HeapSite = std::pair<uint64_t, uint64_t>;

// The live blocks of one site in one process, oldest first. The writer and
// the reader apply the same changes in the same order, so a rank names the
// same block on both sides.
class SiteOrder {
 public:
  // Ranks are looked for among the kRankReach newest entries (live or freed).
  static constexpr size_t kRankReach = 256;
  // A new block: numbers come in increasing order, except a reused block's.
  void add(uint64_t number);
  // The rank of a live block, nullopt when it is not among the kRankReach
  // newest entries (or not here).
  std::optional<uint64_t> rank_of(uint64_t number) const;
  // The live block of rank `rank`, 0 when there is none within reach.
  uint64_t number_of_rank(uint64_t rank) const;
  // Forgets a live block; false when it is not here.
  bool remove(uint64_t number);
  // rank_of, then remove.
  std::optional<uint64_t> take(uint64_t number);
  // number_of_rank, then remove.
  uint64_t take_rank(uint64_t rank);
  bool empty() const { return numbers_.size() == dead_; }

 private:
  static constexpr uint64_t kDead = uint64_t{1} << 63;
  size_t index_of(uint64_t number) const;  // numbers_.size() when absent
  std::optional<uint64_t> rank_at(size_t index) const;
  bool remove_at(size_t index);
  std::vector<uint64_t> numbers_;  // ascending; freed ones marked kDead until tidied away
  size_t dead_ = 0;
};

// Writes Heap records. Not thread-safe: the writer's appending thread.
class HeapRunEncoder {
 public:
  // Blocks are numbered from `first_block` (a test starts near the limit).
  explicit HeapRunEncoder(uint64_t first_block = 1) : next_block_(first_block) {}
  // A recording numbers fewer blocks than this: add() throws
  // std::length_error, before writing anything, at the one that would not be.
  static constexpr uint64_t kMaxBlockNumber = uint64_t{1} << 40;
  // Adds a heap event (is_heap_event) to the current run.
  void add(const Event& event);
  // Every other event, in order: Fork, Exec and Exit move the blocks' numbers
  // with the processes.
  void observe(const Event& event);
  bool run_empty() const { return run_events_ == 0; }
  // Bytes the current run takes so far, as packed (the frame's size bound).
  size_t run_bytes() const;
  // Appends the current run as a Heap record and starts a new one.
  void pack_run(ByteBuffer& out);
  // A new frame: its tables start empty. The run must have been packed.
  void start_frame();
  // Blocks numbered and still live, in every process (for memory accounting).
  size_t live_blocks() const;
  // Their bytes: the heap HeapReplay would find live after the events added
  // so far (what `record --snapshot-when heap>=SIZE` watches).
  uint64_t live_bytes() const { return live_bytes_; }
  // The number written for a call-path hash (0 for 0).
  uint64_t stack_number(uint64_t hash);

 private:
  // One site of one process: its live blocks, and its index in the frame's
  // table once written there (so that a block's free costs one lookup, by
  // address: the block points at its site).
  struct SiteState {
    HeapSite site;
    uint64_t stack_hash = 0;  // the key's, as recorded
    SiteOrder order;
    uint64_t frame = 0;       // the frame whose table holds `index`; 0: none
    uint32_t index = 0;
  };
  // A live block in 8 bytes, its number and its site's slot in its process:
  // the table holds one per live block of the program, the recorder's
  // largest memory on a big heap (docs/BENCHMARKS.md, "memtrack's own memory").
  static constexpr int kSlotBits = 24;
  static constexpr uint64_t kMaxSlots = uint64_t{1} << kSlotBits;
  static_assert(kMaxBlockNumber == uint64_t{1} << (64 - kSlotBits));
  struct Block {
    uint64_t bits;
    Block(uint64_t number, uint32_t slot) : bits(number << kSlotBits | slot) {}
    uint64_t number() const { return bits >> kSlotBits; }
    uint32_t slot() const { return static_cast<uint32_t>(bits & (kMaxSlots - 1)); }
  };
  // Sites by slot, and the slots by (size, recorded call-path hash); a fork's
  // copy keeps the slots. Sites left without blocks are dropped at the next
  // frame, their slots used again.
  struct Process {
    absl::flat_hash_map<uint64_t, Block> blocks;  // by address
    std::vector<SiteState> sites;
    std::vector<uint32_t> free_slots;
    absl::flat_hash_map<std::pair<uint64_t, uint64_t>, uint32_t> slots;
    // The slots of sites allocated at lately, by (size, hash) hashed to
    // kRecentSites entries: most allocations repeat a recent site, and this
    // spares them the table's lookup. Emptied when slots are freed.
    struct RecentSite {
      uint64_t size = 0, stack_hash = 0;
      uint32_t slot = UINT32_MAX;  // UINT32_MAX: empty
    };
    static constexpr size_t kRecentSites = 64;
    std::array<RecentSite, kRecentSites> recent_sites{};
    uint64_t live_bytes = 0;  // the blocks' sizes
    SiteState& site(Block block) { return sites[block.slot()]; }
  };
  // Replaces a process's blocks (Fork, Exec, Exit), keeping live_bytes_.
  void replace_process(int32_t pid, std::optional<Process> with);
  Process& process_of(int32_t pid);
  // The site's slot, made when new.
  uint32_t site_slot(Process& process, uint64_t size, uint64_t stack_hash);
  uint32_t site_index(SiteState& state);
  // Writes the site and the rank (or number) of a live block, and takes it
  // out of its site's order when `released`.
  void encode_block(Process& process, Block block, bool released);
  // Encodes the block a free names (or realloc's old block), and forgets it
  // when `released`.
  void encode_old_block(Process& process, uint64_t address, bool released, uint8_t& kind);
  void encode_new_block(Process& process, uint64_t address, uint32_t slot, uint8_t& kind);

  absl::flat_hash_map<int32_t, Process> processes_;
  int32_t cached_pid_ = 0;
  Process* cached_process_ = nullptr;
  uint64_t next_block_;
  uint64_t live_bytes_ = 0;  // every process's live_bytes
  absl::flat_hash_map<uint64_t, uint64_t> stack_numbers_;

  // The frame's tables.
  uint64_t frame_ = 1;
  absl::flat_hash_map<uint64_t, uint32_t> thread_index_;  // pid << 32 | tid
  // The last event's thread and its index: a thread's events come in runs.
  uint64_t last_thread_key_ = 0;
  uint32_t last_thread_ = UINT32_MAX;  // UINT32_MAX: none this frame
  absl::flat_hash_map<HeapSite, uint32_t> site_index_;

  // The current run.
  uint64_t run_events_ = 0;
  uint64_t run_first_block_ = 0;
  uint64_t run_first_tick_ = 0;
  uint64_t last_tick_ = 0;
  std::vector<uint8_t> new_threads_, new_sites_, kinds_, ticks_, threads_, sites_, refs_, addresses_;
};

// The columns of a Heap record as read (spans into the frame).
struct HeapColumns {
  uint64_t first_block = 0;
  uint64_t first_tick = 0;
  uint64_t tick_ns = 0;
  std::span<const uint8_t> new_threads, new_sites, kinds, ticks, threads, sites, refs, addresses;
};

// Reads Heap records back into events. Throws msgpack_cursor::DecodeError
// on a malformed run (a column too short, an index outside its table).
class HeapRunDecoder {
 public:
  void start_frame();
  // Every other event, in order: Fork, Exec and Exit move the sites' blocks
  // with the processes, as the writer did.
  void observe(const Event& event);
  // Calls on_event for every event of the run, in order, counting each in
  // `delivered`; `event` is reused.
  void expand(const HeapColumns& columns, Event& event, const std::function<void(const Event&)>& on_event,
              uint64_t& delivered);

 private:
  struct Thread {
    int32_t pid, tid;
  };
  // Node-based: the orders stay put while the frame's sites point at them.
  using Sites = absl::node_hash_map<HeapSite, SiteOrder>;
  // A frame site's order in the process being read, valid while
  // `generation` is the decoder's (a process switch, a frame, a Fork, Exec or
  // Exit starts a new generation).
  struct CachedOrder {
    SiteOrder* order = nullptr;
    uint64_t generation = 0;
  };
  void read_tables(const HeapColumns& columns);
  std::vector<Thread> threads_;
  std::vector<HeapSite> sites_;
  std::vector<CachedOrder> orders_;  // by index in sites_
  uint64_t generation_ = 1;
  absl::flat_hash_map<int32_t, Sites> processes_;
  Sites* process_ = nullptr;  // the sites of the latest event's process
  int32_t process_pid_ = 0;
};

}  // namespace memtrack::records
