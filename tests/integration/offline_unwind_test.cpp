// The kernel's stack walk against the offline unwinders: libdwfl (elfutils,
// DwflUnwinder) and ours (StackUnwinder) unwind the raw copies of
// `--stack-mode raw` offline, with the CFI of the files the Mapping records
// name, and must find, frame for frame, the return-address chain the BPF
// walker computed in walk mode for the same call path of fx_stacks (-O2, no
// frame pointers).
//
// The two modes are two runs, so ASLR places the files differently: chains
// are compared as (file path, file offset) pairs, each run's addresses
// translated with its own Mapping records. A path is identified by its
// allocation size (1000 + 10 * path on the main thread).
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "analyze/module_map.h"
#include "recording.h"
#include "unwind/dwfl_unwinder.h"
#include "unwind/stack_unwinder.h"

// An unwind of a recorded copy through the unwinder's signature (registers,
// code map, a cache of its own, the copy as stack memory).
inline memtrack::UnwoundStack unwind_copy(const memtrack::StackUnwinder& unwinder, const memtrack::StackDefinition& d,
                                          const memtrack::CodeMap& code) {
  memtrack::UnwindCache cache;
  return unwinder.unwind(d.regs, code, cache, memtrack::StackCopy(d.sp, d.bytes, d.truncated));
}


namespace memtrack::testing {
namespace {

constexpr int kPaths = 3;
const std::vector<std::string> kFixtureArgs = {"3", "2", "6", "0"};  // paths, rounds, depth, threads

// A code address as a position in a file.
struct FilePos {
  std::string path;
  uint64_t offset = 0;
  bool operator==(const FilePos&) const = default;
};

std::string to_string(const FilePos& p) { return p.path.empty() ? "(unmapped)" : p.path + "+" + hex(p.offset); }

// One recording of fx_stacks with its mappings, stack definitions and, per
// allocation size, the last Malloc of the marker window.
struct FxRun {
  Recorded recorded;
  double seconds = 0;
  int pid = 0;
  ModuleMap modules;
  std::map<uint64_t, const Event*> definitions;  // hash -> Stack event
  std::map<uint64_t, const Event*> last_malloc;  // size -> Malloc
  std::vector<std::string> problems;

  const StackDefinition* definition_of(uint64_t size, const Event** stack_event = nullptr) const {
    auto m = last_malloc.find(size);
    if (m == last_malloc.end()) return nullptr;
    auto d = definitions.find(m->second->stack_hash);
    if (d == definitions.end()) return nullptr;
    if (stack_event) *stack_event = d->second;
    return d->second->stack.get();
  }

  // `address` (a return address: looked up at address - 1) in the file
  // mapped there when the definition was recorded.
  FilePos where(uint64_t address, uint64_t timestamp) const {
    const Placement* p = modules.placement_at(pid, address - 1, timestamp);
    if (!p) return {};
    return {p->mapping->path, address - p->start + p->mapping->file_offset};
  }

  // The executable files mapped at `timestamp`, for libdwfl.
  std::vector<DwflMapping> mappings_at(uint64_t timestamp) const {
    std::vector<DwflMapping> v;
    for (const auto& p : modules.placements(pid))
      if (p.live_at(timestamp)) v.push_back({p.mapping->path, p.start, p.end, p.mapping->file_offset});
    return v;
  }
};

// The same mappings for StackUnwinder, one UnwindModule per file.
class PlacementCodeMap : public CodeMap {
 public:
  explicit PlacementCodeMap(const std::vector<DwflMapping>& mappings) {
    for (const auto& m : mappings) {
      auto& module = modules_[m.path];
      if (!module && !m.path.empty() && m.path[0] == '/') module = std::make_unique<UnwindModule>(m.path);
      ranges_.push_back({m.start, m.end, m.file_offset, module.get()});
    }
  }
  const CodeRange* find(uint64_t address) const override {
    for (const CodeRange& r : ranges_)
      if (address >= r.start && address < r.end) return &r;
    return nullptr;
  }

 private:
  std::map<std::string, std::unique_ptr<UnwindModule>> modules_;
  std::vector<CodeRange> ranges_;
};

// "info <pid> path <tid>:<path>:<size> <ra>..." of the main thread: glibc's
// backtrace() from the leaf, per size.
std::map<uint64_t, std::vector<uint64_t>> backtraces(const std::string& out) {
  std::map<uint64_t, std::vector<uint64_t>> by_size;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::string tag, key, where;
    int pid = 0;
    f >> tag >> pid >> key >> where;
    if (tag != "info" || key != "path" || where.find('-') != std::string::npos) continue;
    auto& v = by_size[std::stoull(where.substr(where.rfind(':') + 1))];
    for (std::string ra; f >> ra;) v.push_back(std::stoull(ra, nullptr, 16));
  }
  return by_size;
}

std::unique_ptr<FxRun> record_run(const std::vector<std::string>& options) {
  auto run = std::make_unique<FxRun>();
  TempDir dir;
  std::vector<std::string> command = {FX_STACKS};
  command.insert(command.end(), kFixtureArgs.begin(), kFixtureArgs.end());
  auto t0 = std::chrono::steady_clock::now();
  run->recorded = record_command(dir, command, std::chrono::seconds(120), {}, options);
  run->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Recorded& r = run->recorded;
  if (r.run.exit_code() != 0) run->problems.push_back("memtrack record failed: " + r.run.describe());
  if (auto ok = clean_read(r.rec); !ok) run->problems.push_back(ok.message());
  if (auto ok = no_losses(r.rec); !ok) run->problems.push_back(ok.message());
  GroundTruth gt = parse_ground_truth(r.run.out);
  for (const auto& [key, values] : gt.info)
    if (key.second == "path") run->pid = key.first;
  if (run->pid == 0) {
    run->problems.push_back("no ground truth from the fixture: " + r.run.describe());
    return run;
  }
  for (const auto& e : r.rec.events) {
    run->modules.on_event(e);
    if (e.type == EventType::Stack && e.stack) run->definitions.emplace(e.stack->hash, &e);
  }
  std::vector<Event> window;
  if (auto ok = marker_window(r.rec.events, run->pid, &window); !ok) run->problems.push_back(ok.message());
  // The window holds copies: find the same allocations in the recording.
  std::map<uint64_t, uint64_t> last_timestamp;
  for (const auto& e : window)
    if (e.type == EventType::Malloc) last_timestamp[e.size] = e.timestamp;
  for (const auto& e : r.rec.events)
    if (e.type == EventType::Malloc && e.pid == run->pid && last_timestamp.count(e.size) &&
        last_timestamp[e.size] == e.timestamp)
      run->last_malloc[e.size] = &e;
  return run;
}

class OfflineUnwind : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!have_bpf_privileges()) return;
    raw_ = record_run({"--stacks", "--stack-mode", "raw"}).release();
    walk_ = record_run({"--stacks"}).release();
    std::cout << "recorded raw mode in " << raw_->seconds << " s, walk mode in " << walk_->seconds << " s\n";
  }
  static void TearDownTestSuite() {
    delete raw_;
    delete walk_;
    raw_ = walk_ = nullptr;
  }
  void SetUp() override {
    MEMTRACK_REQUIRE_BPF_PRIVILEGES();
    for (const FxRun* run : {raw_, walk_})
      for (const auto& p : run->problems) ADD_FAILURE() << p;
    ASSERT_FALSE(HasFailure());
    for (int path = 0; path < kPaths; ++path) {
      uint64_t size = 1000 + 10 * path;
      ASSERT_NE(raw_->definition_of(size), nullptr) << "raw mode: no definition for the last allocation of " << size;
      ASSERT_NE(walk_->definition_of(size), nullptr) << "walk mode: no definition for the last allocation of " << size;
    }
    const auto mappings = raw_->mappings_at(last_definition_time());
    unwinder_ = std::make_unique<DwflUnwinder>(mappings);
    ASSERT_EQ(unwinder_->error(), "");
    ASSERT_GE(unwinder_->modules(), 3u) << "fx_stacks, libc and ld.so at least";
    code_map_ = std::make_unique<PlacementCodeMap>(mappings);
  }

  // The raw copy of path `size` (with its registers and bytes replaced by
  // `regs` and `bytes` when given).
  StackDefinition raw_copy(uint64_t size, const std::vector<uint64_t>* regs = nullptr,
                           const std::vector<uint8_t>* bytes = nullptr) const {
    StackDefinition def = *raw_->definition_of(size);
    if (regs) def.regs = *regs;
    if (bytes) def.bytes = *bytes;
    return def;
  }

  // The raw copy of path `size`, unwound by libdwfl; `frame_sps`: each
  // frame's rsp as libdwfl recovered it.
  UnwoundStack unwind_raw(uint64_t size, const std::vector<uint64_t>* regs = nullptr,
                          const std::vector<uint8_t>* bytes = nullptr, std::vector<uint64_t>* frame_sps = nullptr) {
    return unwinder_->unwind(raw_copy(size, regs, bytes), frame_sps);
  }

  // The return addresses of an unwind as file positions of the raw run.
  std::vector<FilePos> raw_positions(uint64_t size, const UnwoundStack& result) const {
    const Event* stack = nullptr;
    raw_->definition_of(size, &stack);
    std::vector<FilePos> v;
    for (uint64_t ra : result.return_addresses) v.push_back(raw_->where(ra, stack->timestamp));
    return v;
  }
  std::vector<FilePos> walk_positions(uint64_t size) const {
    const Event* stack = nullptr;
    const StackDefinition* def = walk_->definition_of(size, &stack);
    std::vector<FilePos> v;
    for (uint64_t ra : def->chain) v.push_back(walk_->where(ra, stack->timestamp));
    return v;
  }

  // Frame for frame, with both chains listed (and libdwfl's symbols).
  ::testing::AssertionResult same_chain(const std::vector<FilePos>& dwfl, const UnwoundStack& result,
                                        const std::vector<FilePos>& walk) const {
    bool same = dwfl == walk;
    for (const auto& p : walk) same = same && !p.path.empty();
    auto out = same ? ::testing::AssertionSuccess() : ::testing::AssertionFailure();
    out << "offline " << dwfl.size() << " return addresses (" << unwind_stop_name(result.stop)
        << "), kernel walk " << walk.size() << ":\n";
    for (size_t i = 0; i < std::max(dwfl.size(), walk.size()); ++i) {
      bool differs = i >= dwfl.size() || i >= walk.size() || !(dwfl[i] == walk[i]);
      out << "  #" << i << (differs ? " ≠ " : "   ") << (i < dwfl.size() ? to_string(dwfl[i]) : "(none)") << "  |  "
          << (i < walk.size() ? to_string(walk[i]) : "(none)");
      if (i < result.return_addresses.size()) out << "  " << unwinder_->describe(result.return_addresses[i], false);
      out << "\n";
    }
    return out;
  }

  uint64_t last_definition_time() const {
    uint64_t t = 0;
    for (int path = 0; path < kPaths; ++path) {
      const Event* stack = nullptr;
      if (raw_->definition_of(1000 + 10 * path, &stack)) t = std::max(t, stack->timestamp);
    }
    return t;
  }

  static FxRun* raw_;
  static FxRun* walk_;
  std::unique_ptr<DwflUnwinder> unwinder_;
  std::unique_ptr<PlacementCodeMap> code_map_;
};

FxRun* OfflineUnwind::raw_ = nullptr;
FxRun* OfflineUnwind::walk_ = nullptr;

TEST_F(OfflineUnwind, OfflineUnwindsOfTheRawCopyMatchTheKernelWalk) {
  auto truth = backtraces(raw_->recorded.run.out);
  for (int path = 0; path < kPaths; ++path) {
    uint64_t size = 1000 + 10 * path;
    SCOPED_TRACE("path " + std::to_string(path) + ", size " + std::to_string(size));
    const StackDefinition* raw = raw_->definition_of(size);
    const StackDefinition* walk = walk_->definition_of(size);
    ASSERT_EQ(raw->end, StackEnd::NotWalked);
    ASSERT_EQ(raw->regs.size(), 17u);
    ASSERT_EQ(raw->regs[7], raw->sp) << "rsp is where the copy starts";
    // The copy may stop at the budget (`truncated`) above _start's frame:
    // how far the stack's end lies beyond it varies with ASLR's gap.
    ASSERT_EQ(walk->end, StackEnd::Complete) << "second round: rules learned in the first";
    // The activation frame (regs[16]) is the probed allocator at its entry.
    EXPECT_NE(unwinder_->describe(raw->regs[16], true).find("malloc"), std::string::npos)
        << unwinder_->describe(raw->regs[16], true);

    auto t0 = std::chrono::steady_clock::now();
    UnwoundStack result = unwind_raw(size);
    auto t1 = std::chrono::steady_clock::now();
    UnwoundStack own = unwind_copy(StackUnwinder(), *raw, *code_map_);
    auto t2 = std::chrono::steady_clock::now();
    const double dwfl_us = std::chrono::duration<double, std::micro>(t1 - t0).count();
    const double own_us = std::chrono::duration<double, std::micro>(t2 - t1).count();
    ASSERT_EQ(result.stop, UnwindStop::Complete) << "libdwfl stopped (" << unwind_stop_name(result.stop) << ") after "
                                                 << result.return_addresses.size() << " return addresses";
    ASSERT_GE(result.return_addresses.size(), 9u) << "a real comparison";

    std::vector<FilePos> dwfl = raw_positions(size, result);
    std::vector<FilePos> kernel = walk_positions(size);
    // Both end at the return address into _start, whose CFI marks the
    // return address undefined: libdwfl stops there exactly as the walker
    // does ("complete"), so the lengths are equal, not off by one.
    EXPECT_TRUE(same_chain(dwfl, result, kernel));
    ASSERT_FALSE(dwfl.empty());
    EXPECT_NE(unwinder_->describe(result.return_addresses.back(), false).find("_start"), std::string::npos)
        << unwinder_->describe(result.return_addresses.back(), false);

    // Ours: the same addresses, without falling back to frame pointers.
    EXPECT_EQ(own.stop, UnwindStop::Complete) << unwind_stop_name(own.stop) << " at " << hex(own.stop_address);
    EXPECT_FALSE(own.frame_pointer_fallback);
    EXPECT_TRUE(same_chain(raw_positions(size, own), own, kernel));

    // A fourth unwinder in the raw run's own process: glibc's backtrace()
    // from the leaf (its [0] returns after backtrace(), ours after malloc).
    const auto& bt = truth[size];
    ASSERT_EQ(bt.size(), result.return_addresses.size()) << "backtrace() frames vs libdwfl return addresses";
    for (size_t i = 1; i < bt.size(); ++i) EXPECT_EQ(hex(result.return_addresses[i]), hex(bt[i])) << "frame " << i;

    std::cout << "size " << size << ": " << dwfl.size() << " return addresses agree (libdwfl unwind " << dwfl_us
              << " us, ours " << own_us << " us, copy of " << raw->bytes.size() << " bytes"
              << (raw->truncated ? ", truncated" : "") << "); outermost "
              << unwinder_->describe(result.return_addresses.back(), false) << "\n";
  }
}

// The comparison can fail: one word of the copy or one register changed,
// and the unwind no longer yields the kernel's chain.
TEST_F(OfflineUnwind, ACorruptedCopyDoesNotYieldTheSameChain) {
  const uint64_t size = 1000;
  const StackDefinition& def = *raw_->definition_of(size);
  ASSERT_EQ(walk_->definition_of(size)->end, StackEnd::Complete);
  std::vector<uint64_t> sps;
  UnwoundStack good = unwind_raw(size, nullptr, nullptr, &sps);
  ASSERT_EQ(good.stop, UnwindStop::Complete) << unwind_stop_name(good.stop);
  ASSERT_GE(good.return_addresses.size(), 9u);
  ASSERT_EQ(sps.size(), good.return_addresses.size());
  std::vector<FilePos> kernel = walk_positions(size);
  ASSERT_TRUE(same_chain(raw_positions(size, good), good, kernel)) << "the uncorrupted copy agrees";

  // One word, for every return address in turn: the slot return address k
  // was read from (its frame's rsp - 8, libdwfl's CFA of the frame below),
  // changed by 0x10. The return addresses below it still agree, k does not.
  for (size_t k = 0; k < good.return_addresses.size(); ++k) {
    SCOPED_TRACE("slot of return address " + std::to_string(k));
    ASSERT_NE(sps[k], 0u);
    uint64_t slot = sps[k] - 8;
    ASSERT_GE(slot, def.sp);
    ASSERT_LE(slot + 8, def.sp + def.bytes.size());
    std::vector<uint8_t> bytes = def.bytes;
    uint64_t word = 0;
    std::memcpy(&word, bytes.data() + (slot - def.sp), 8);
    ASSERT_EQ(word, good.return_addresses[k]) << "the slot holds return address " << k;
    word += 0x10;
    std::memcpy(bytes.data() + (slot - def.sp), &word, 8);
    const UnwoundStack bad_dwfl = unwind_raw(size, nullptr, &bytes);
    const UnwoundStack bad_own = unwind_copy(StackUnwinder(), raw_copy(size, nullptr, &bytes), *code_map_);
    for (const UnwoundStack* bad : {&bad_dwfl, &bad_own}) {
      std::vector<FilePos> positions = raw_positions(size, *bad);
      EXPECT_FALSE(same_chain(positions, *bad, kernel));
      ASSERT_GT(positions.size(), k);
      EXPECT_TRUE(std::equal(positions.begin(), positions.begin() + k, kernel.begin()))
          << "the frames below the corrupted slot still agree";
      EXPECT_NE(positions[k], kernel[k]);
    }
  }
  // One register: rsp 8 bytes higher (the copy still starts at sp), so the
  // allocator's return address is read from the wrong slot (here a zero
  // word, which libdwfl takes for the end of the stack). The callee-saved
  // registers are not corrupted: without frame pointers no CFA depends on
  // them, and they cannot change a chain.
  {
    std::vector<uint64_t> regs = def.regs;
    regs[7] += 8;
    const UnwoundStack bad_dwfl = unwind_raw(size, &regs);
    const UnwoundStack bad_own = unwind_copy(StackUnwinder(), raw_copy(size, &regs), *code_map_);
    for (const UnwoundStack* bad : {&bad_dwfl, &bad_own}) {
      std::vector<FilePos> positions = raw_positions(size, *bad);
      EXPECT_FALSE(same_chain(positions, *bad, kernel));
      EXPECT_TRUE(positions.empty() || !(positions[0] == kernel[0])) << "the first return address already differs";
    }
  }
}

}  // namespace
}  // namespace memtrack::testing
