// The interposer's stack walker (src/interpose/stack_walk.c) run in this
// process, with the tables the recorder shares as `record --stacks` fills
// them: this process's module table, and every rule of its
// mapped files prepared the way the unwind learner prepares them (every
// return address of the file, its rule from the CFI). For stack_walk_test
// and bench/walk_bench.cpp. The walker's state is process-wide: one instance
// per process (InProcessWalker::instance).
#pragma once

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "record/intake/shm_stacks.h"
#include "record/unwind_rules/call_sites.h"
#include "unwind/cfi_rules.h"
#include "util/proc_maps.h"
#include "wire/shared_memory.h"
#include "wire/stack_table.h"

extern "C" {
#include "interpose/stack_walk.h"
}

namespace memtrack {

// A definition the walker wrote: its header and chain.
struct WalkDefinition {
  mt_stack_header header;
  std::vector<uint64_t> chain;
};

class InProcessWalker {
 public:
  static InProcessWalker& instance() {
    static InProcessWalker walker;
    return walker;
  }

  // The hash the walker gives an allocation made by the function whose frame
  // (its saved rbp, then its return address) is at `frame`, as an interposer
  // wrapper passes __builtin_frame_address(0).
  uint64_t capture(void* const* frame) { return mt_stack_capture(chunk_, frame); }

  // The definitions written since the last call.
  std::vector<WalkDefinition> definitions() {
    std::vector<WalkDefinition> found;
    stacks_.drain([&](void* record, size_t size) {
      WalkDefinition d;
      std::memcpy(&d.header, record, sizeof(d.header));
      if (size < sizeof(d.header) + d.header.frames * 8ull) throw std::runtime_error("a short stack definition");
      d.chain.resize(d.header.frames);
      std::memcpy(d.chain.data(), static_cast<char*>(record) + sizeof(d.header), d.header.frames * 8ull);
      found.push_back(std::move(d));
    });
    return found;
  }

  // This process's module table as the recorder made it; a new one replaces
  // it the way the recorder rewrites it when mappings change.
  const mt_module_table& modules() const { return modules_; }
  void set_modules(const mt_module_table& table) { stacks_.set_module_table(getpid(), table); }

  std::map<std::string, uint64_t> counters() const { return stacks_.counters(); }

 private:
  InProcessWalker() : stacks_(static_cast<uid_t>(-1), 8192) {
    prepare_tables();
    // The events' shared memory up to the first chunk, which this thread owns.
    events_size_ = MT_SHM_CHUNKS_OFFSET + sizeof(mt_shm_chunk);
    void* events = mmap(nullptr, events_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (events == MAP_FAILED) throw std::runtime_error("cannot map the events' memory");
    auto* header = static_cast<mt_shm_header*>(events);
    header->chunk_count = MT_SHM_CHUNKS;
    header->recorder_pid = static_cast<uint32_t>(getpid());
    chunk_ = mt_shm_chunk_at(events, 0);
    chunk_->state = MT_CHUNK_OWNED;
    chunk_->pid = static_cast<uint32_t>(getpid());
    chunk_->tid = static_cast<uint32_t>(syscall(SYS_gettid));
    chunk_->claimed_ns = 1;
    setenv(MT_STACKS_ENV, stacks_.path().c_str(), 1);
    if (!mt_stacks_open(header) || !mt_stacks_on()) throw std::runtime_error("the walker cannot open " + stacks_.path());
  }

  void prepare_tables() {
    std::map<std::string, uint32_t> file_ids;
    std::vector<MapEntry> code;
    for (const MapEntry& m : read_maps(getpid()))
      if (m.executable() && m.ino != 0 && !m.path.empty() && m.path[0] == '/') code.push_back(m);
    std::sort(code.begin(), code.end(), [](const MapEntry& a, const MapEntry& b) { return a.start < b.start; });
    if (code.size() > MT_MAX_MODULES) throw std::runtime_error("too many modules");
    for (const MapEntry& m : code) {
      auto [it, added] = file_ids.try_emplace(m.path, static_cast<uint32_t>(file_ids.size()));
      modules_.modules[modules_.count++] = {m.start, m.end, m.offset, it->second, 0};
      if (!added) continue;
      ModuleCfi cfi(m.path);
      std::vector<mt_rule_key> keys;
      std::vector<mt_unwind_rule> rules;
      std::vector<uint64_t> offsets = return_address_offsets(m.path);
      std::vector<std::optional<mt_unwind_rule>> derived = cfi.rules_at_return_addresses(offsets);
      for (size_t i = 0; i < offsets.size(); ++i) {
        if (derived[i]) {
          keys.push_back({it->second, 0, offsets[i]});
          rules.push_back(*derived[i]);
        }
      }
      stacks_.add_file_rules(keys, rules);
    }
    stacks_.set_module_table(getpid(), modules_);
  }

  InterposerStacks stacks_;
  mt_module_table modules_{};
  size_t events_size_ = 0;
  mt_shm_chunk* chunk_ = nullptr;
};

}  // namespace memtrack
