// Keeps the kernel's stack walker supplied: the executable mappings of each
// tracked process (module tables), and unwind rules learned from each
// module's CFI when a walk stops at a return address it has no rule for. Map
// updates are syscalls, so misses are handled on this class's own thread,
// never on the ring poller.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "format/event.h"
#include "record/probes/bpf_session.h"
#include "record/unwind_rules/prepared_rules_handoff.h"
#include "record/work_queue.h"

namespace memtrack {

class ModuleCfi;
class InterposerStacks;
class RuleCache;

class UnwindLearner {
 public:
  // Files' prepared rules are read from `cache` (when given) if it has them,
  // and written there when derived. With `shared`, module tables and rules
  // go there too, for the interposers' walks (call paths on the fast path)
  // of the processes that map `interposer_library`.
  UnwindLearner(BpfSession& session, std::unique_ptr<RuleCache> cache, InterposerStacks* shared = nullptr,
                std::string interposer_library = {});
  ~UnwindLearner();  // resumes every process still waiting
  UnwindLearner(const UnwindLearner&) = delete;
  UnwindLearner& operator=(const UnwindLearner&) = delete;

  // Rereads `pid`'s executable mappings into its module table. Synchronous:
  // called while the process is stopped for new mappings.
  void refresh_modules(pid_t pid);
  void forget(pid_t pid);
  // Queues a definition whose walk stopped for want of a module or a rule.
  // The learner walks its raw copy the way the kernel does, learning every
  // rule the path needs (refreshing the module table when an address is in
  // none), so a call path misses once rather than once per frame.
  // With `resume`, the kernel stopped the process for this: it is resumed
  // once the path's rules are known. With `live`, the thread waits (stopped,
  // or in the interposer) with its callers' frames as walked: the path is
  // followed past the copy on its live stack.
  void submit_miss(pid_t pid, std::shared_ptr<const StackDefinition> stack, bool resume, bool live);
  // Stops learning: processes waiting for rules are resumed, and files not
  // prepared yet stay so (nothing walks them any more).
  void finish();
  std::map<std::string, uint64_t> counters() const;

 private:
  struct Module {
    uint64_t start, end, file_offset;
    uint32_t file_id;
  };
  struct File {
    std::string path;
    uint64_t dev = 0, ino = 0;  // of the mapping (kernel_dev encoding)
    std::unique_ptr<ModuleCfi> cfi;  // opened on first use
    bool unreadable = false;
    // Its rules prepared ahead, by file offset; the kernel may not have them
    // yet (fast path).
    std::vector<mt_rule_key> prepared_keys;
    std::vector<mt_unwind_rule> prepared_rules;
    PreparedRulesHandoff kernel_share;
  };
  // A miss to learn from, or (no stack) a newly seen file to prepare.
  struct Job {
    pid_t pid = 0;
    std::shared_ptr<const StackDefinition> stack;
    bool resume = false;
    bool live = false;
    uint32_t prepare_file = 0;
  };
  void handle(const Job& job);
  // Gives the walkers the rule of every return address of the file, so walks
  // through it complete from the first. With the fast path, the kernel gets
  // them when its walk first misses in the file: its walks are then few.
  void prepare_file(uint32_t file_id);
  // The file's CFI, opened on first use; null when unreadable.
  ModuleCfi* cfi_of(File& file);
  void give_rules(const std::vector<mt_rule_key>& keys, const std::vector<mt_unwind_rule>& rules);
  // Walks the path as the kernel does and learns every rule it needs; with
  // `stopped` (the thread waits in the allocator's entry), on past the copy
  // on the process's live stack.
  // `for_kernel`: the kernel's walk missed (it stopped the process).
  void learn_path(pid_t pid, const StackDefinition& stack, bool stopped, bool for_kernel);
  // What the kernel is given of the rules a path needs that it lacks.
  enum class KernelShare { None, Rule, File };
  // Gives the kernel the file's prepared rules (the first call after they
  // are prepared does).
  void give_kernel_prepared(File& file);
  // The rule for return address `pc` of `pid`, learned and given to the
  // kernel if new; nullopt when `pc` is in no known module.
  std::optional<mt_unwind_rule> rule_for(pid_t pid, uint64_t pc, KernelShare share);
  void refresh_modules_locked(pid_t pid);

  BpfSession& session_;
  mutable std::mutex mutex_;
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> file_ids_;  // (dev, ino) -> id
  std::vector<File> files_;                                     // by id
  std::map<pid_t, std::vector<Module>> modules_;                // sorted by start
  std::map<std::pair<uint32_t, uint64_t>, mt_unwind_rule> rules_;  // (file id, file offset): learned from misses
  uint64_t rules_learned_ = 0, rules_without_cfi_ = 0, rules_prepared_ = 0, rules_not_stored_ = 0,
           files_prepared_ = 0, files_not_prepared_ = 0, files_unprepared_at_end_ = 0, tables_refreshed_ = 0,
           modules_dropped_ = 0, failures_ = 0;
  uint64_t kernel_rules_deferred_given_ = 0;
  uint64_t prepare_sweep_us_ = 0, prepare_derive_us_ = 0, prepare_give_us_ = 0;
  std::unique_ptr<RuleCache> cache_;  // used by the learner's thread only
  uint64_t cache_hits_ = 0, cache_rejected_ = 0, cache_stored_ = 0, prepare_cache_us_ = 0;
  InterposerStacks* shared_ = nullptr;
  std::string interposer_library_;
  std::set<pid_t> interposing_;  // processes that map the interposer
  WorkQueue<Job> jobs_;  // last: its thread uses the members above
};

}  // namespace memtrack
