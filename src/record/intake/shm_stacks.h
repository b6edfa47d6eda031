// The recorder's side of call paths on the fast path (call paths): the
// shared file through which every interposer walks its own stack with the
// kernel walker's rules (wire/stack_table.h). The
// unwind learner writes each process's module table and every rule it gives
// the kernel here too; the ring poller drains the definitions the
// interposers write, which have the kernel's stack-ring record format.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "wire/events.h"
#include "wire/shared_memory.h"
#include "wire/unwind_rule.h"

struct mt_unwind_rule;

namespace memtrack {

class InterposerStacks {
 public:
  // Creates the file in /dev/shm (owned by `owner_uid` when not -1), with
  // one definition ring per interposer chunk.
  InterposerStacks(uid_t owner_uid, uint32_t stack_budget);
  ~InterposerStacks();  // unmaps and removes the file
  InterposerStacks(const InterposerStacks&) = delete;
  InterposerStacks& operator=(const InterposerStacks&) = delete;

  const std::string& path() const { return path_; }
  // Removes the file now (the processes keep their mappings); the
  // destructor then leaves it alone.
  void remove_file();

  // The writers: one thread at a time (the unwind learner's, under its lock).
  void set_module_table(pid_t pid, const mt_module_table& table);
  void forget(pid_t pid);
  // Rules never change once given; returns how many found room.
  size_t add_rules(const std::vector<mt_rule_key>& keys, const std::vector<mt_unwind_rule>& rules);
  // The prepared rules of a whole file (one file id), given once: a region
  // of their own when there is room, else the hashed slots.
  size_t add_file_rules(const std::vector<mt_rule_key>& keys, const std::vector<mt_unwind_rule>& rules);

  // Hands every definition published since the last call to `take` (an
  // mt_stack_header and what follows, as on the kernel's stack ring), from
  // the rings of the first `rings` chunks (InterposerChannel::chunks_used():
  // a ring is its chunk's, and a ring never written is never touched, since
  // each is a page of the file the kernel would allocate and clear). Poller
  // thread only.
  void drain(const std::function<void(void* record, size_t size)>& take, uint32_t rings = MT_SHM_CHUNKS);

  std::map<std::string, uint64_t> counters() const;

 private:
  friend void name_stacks_file(std::vector<std::string>& environment, const InterposerStacks* stacks);
  std::string path_;
  bool file_removed_ = false;
  void* base_ = nullptr;
  uint64_t size_ = 0;
  uint64_t rules_not_stored_ = 0, malformed_ = 0, processes_not_stored_ = 0;
  uint64_t region_bytes_used_ = 0;
  uint64_t rules_in_regions_ = 0;
};

// `environment` naming `stacks`'s file to the command's processes, or none
// when null (an entry inherited from an outer recording is removed).
void name_stacks_file(std::vector<std::string>& environment, const InterposerStacks* stacks);

}  // namespace memtrack
