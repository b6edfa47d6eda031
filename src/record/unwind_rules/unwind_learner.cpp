#include "record/unwind_rules/unwind_learner.h"

#include <signal.h>
#include <sys/uio.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "record/unwind_rules/call_sites.h"
#include "record/process/proc_fs.h"
#include "record/unwind_rules/rule_cache.h"
#include "record/intake/shm_stacks.h"
#include "unwind/cfi_rules.h"

namespace memtrack {

namespace {
// Rules prepared ahead for whole files may fill at most half the kernel's
// rule map (1 << 20 entries); the rest is for rules learned on misses.
constexpr size_t kPreparedRulesBudget = size_t{1} << 19;
// How far above the stack pointer a path is followed on the live stack (the
// default stack limit of a main thread).
constexpr uint64_t kMaxLiveStackBytes = uint64_t{8} << 20;

uint64_t thread_cpu_us() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000 + static_cast<uint64_t>(t.tv_nsec) / 1000;
}
}  // namespace

UnwindLearner::UnwindLearner(BpfSession& session, std::unique_ptr<RuleCache> cache, InterposerStacks* shared,
                             std::string interposer_library)
    : session_(session),
      cache_(std::move(cache)),
      shared_(shared),
      interposer_library_(std::move(interposer_library)),
      jobs_([this](Job& job) { handle(job); }) {}

UnwindLearner::~UnwindLearner() { finish(); }

void UnwindLearner::finish() {
  // Files still queued when the recording ends are not prepared: no walk
  // would use their rules any more.
  uint64_t unprepared = 0;
  for (const Job& job : jobs_.stop()) {
    if (job.resume) session_.resume_task(job.pid);
    if (!job.stack) ++unprepared;
  }
  std::lock_guard lock(mutex_);
  files_unprepared_at_end_ += unprepared;
}

void UnwindLearner::refresh_modules(pid_t pid) {
  std::lock_guard lock(mutex_);
  refresh_modules_locked(pid);
}

void UnwindLearner::refresh_modules_locked(pid_t pid) {
  std::vector<Module> modules;
  bool interposing = false;
  for (const auto& m : read_maps(pid)) {
    if (!interposer_library_.empty() && m.path == interposer_library_) interposing = true;
    if (!m.executable() || m.ino == 0) continue;
    auto [it, added] = file_ids_.try_emplace({m.kernel_dev(), m.ino}, static_cast<uint32_t>(files_.size()));
    if (added) {
      char map_file[96];
      std::snprintf(map_file, sizeof(map_file), "/proc/%d/map_files/%lx-%lx", pid,
                    static_cast<unsigned long>(m.start), static_cast<unsigned long>(m.end));
      // The mapping itself opens the right file even if its path is stale.
      files_.push_back({m.path.empty() || m.path[0] != '/' ? map_file : m.path, m.kernel_dev(), m.ino, nullptr, false,
                        {}, {}, {}});
      Job prepare;
      prepare.prepare_file = it->second;
      jobs_.push(std::move(prepare));
    }
    modules.push_back({m.start, m.end, m.offset, it->second});
  }
  std::sort(modules.begin(), modules.end(), [](const Module& a, const Module& b) { return a.start < b.start; });
  mt_module_table table{};
  size_t count = std::min<size_t>(modules.size(), MT_MAX_MODULES);
  modules_dropped_ += modules.size() - count;
  table.count = static_cast<uint32_t>(count);
  for (size_t i = 0; i < count; ++i)
    table.modules[i] = {modules[i].start, modules[i].end, modules[i].file_offset, modules[i].file_id, 0};
  session_.set_module_table(pid, table);
  if (shared_) shared_->set_module_table(pid, table);
  modules_[pid] = std::move(modules);
  if (interposing)
    interposing_.insert(pid);
  else
    interposing_.erase(pid);
  ++tables_refreshed_;
}

void UnwindLearner::forget(pid_t pid) {
  std::lock_guard lock(mutex_);
  interposing_.erase(pid);
  if (!modules_.erase(pid)) return;
  session_.forget_module_table(pid);
  if (shared_) shared_->forget(pid);
}

void UnwindLearner::submit_miss(pid_t pid, std::shared_ptr<const StackDefinition> stack, bool resume, bool live) {
  // Ahead of file preparations: a process may be waiting for it.
  jobs_.push({pid, std::move(stack), resume, live, 0}, true);
}

void UnwindLearner::handle(const Job& job) {
  try {
    if (job.stack)
      learn_path(job.pid, *job.stack, job.live, job.resume);
    else
      prepare_file(job.prepare_file);
  } catch (const std::exception&) {
    std::lock_guard lock(mutex_);
    ++failures_;  // a map update failed: walks stay raw
  }
  if (job.resume) session_.resume_task(job.pid);
}

std::optional<mt_unwind_rule> UnwindLearner::rule_for(pid_t pid, uint64_t pc, KernelShare share) {
  // The module of the call instruction, which precedes the return address.
  auto in_module = [&](const Module& m) { return pc - 1 >= m.start && pc - 1 < m.end; };
  auto& modules = modules_[pid];
  auto module = std::find_if(modules.begin(), modules.end(), in_module);
  if (module == modules.end()) {
    refresh_modules_locked(pid);  // mapped since the table was made
    module = std::find_if(modules.begin(), modules.end(), in_module);
    if (module == modules.end()) return std::nullopt;
  }
  mt_rule_key key{module->file_id, 0, pc - module->start + module->file_offset};
  File& file = files_[key.file_id];
  if (share == KernelShare::File && file.kernel_share.kernel_needs()) give_kernel_prepared(file);
  auto prepared = std::lower_bound(file.prepared_keys.begin(), file.prepared_keys.end(), key,
                                   [](const mt_rule_key& a, const mt_rule_key& b) { return a.file_offset < b.file_offset; });
  if (prepared != file.prepared_keys.end() && prepared->file_offset == key.file_offset) {
    const mt_unwind_rule& rule = file.prepared_rules[prepared - file.prepared_keys.begin()];
    if (share == KernelShare::Rule && !file.kernel_share.kernel_has())
      rules_not_stored_ += 1 - session_.add_unwind_rules({key}, {rule});
    return rule;
  }
  auto known = rules_.find({key.file_id, key.file_offset});
  if (known != rules_.end()) return known->second;

  std::optional<mt_unwind_rule> rule;
  if (ModuleCfi* cfi = cfi_of(files_[key.file_id])) rule = cfi->rule_at_return_address(key.file_offset);
  if (rule) {
    ++rules_learned_;
  } else {
    // Without CFI the walk cannot go on: say so once, so later walks stop
    // there at once and keep the raw copy for the offline unwinder.
    rule = mt_unwind_rule{};
    rule->flags = MT_RULE_UNSUPPORTED;
    ++rules_without_cfi_;
  }
  give_rules({key}, {*rule});
  return rule;
}

ModuleCfi* UnwindLearner::cfi_of(File& file) {
  if (!file.cfi && !file.unreadable) {
    try {
      file.cfi = std::make_unique<ModuleCfi>(file.path);
    } catch (const std::exception&) {
      file.unreadable = true;
    }
  }
  return file.cfi.get();
}

void UnwindLearner::give_rules(const std::vector<mt_rule_key>& keys, const std::vector<mt_unwind_rule>& rules) {
  size_t stored = session_.add_unwind_rules(keys, rules);
  if (shared_) shared_->add_rules(keys, rules);
  rules_not_stored_ += keys.size() - stored;
  for (size_t i = 0; i < stored; ++i) rules_[{keys[i].file_id, keys[i].file_offset}] = rules[i];
}


void UnwindLearner::prepare_file(uint32_t file_id) {
  std::string path;
  uint64_t dev, ino;
  ModuleCfi* cfi;
  {
    std::lock_guard lock(mutex_);
    path = files_[file_id].path;
    dev = files_[file_id].dev;
    ino = files_[file_id].ino;
    cfi = cfi_of(files_[file_id]);  // ModuleCfi lookups are thread-safe
  }
  if (!cfi) return;
  uint64_t started = thread_cpu_us();
  // The cache is for the mapped file only: not for another one found at its
  // path since (replaced by an upgrade), nor when it changed meanwhile.
  auto source_of_mapped = [&]() -> std::optional<RuleSource> {
    auto source = RuleCache::source_of(path);
    if (source && (kernel_dev_of(static_cast<dev_t>(source->dev)) != dev || source->ino != ino)) return std::nullopt;
    return source;
  };
  // Prepared rules may fill at most half the map: the rest is for misses.
  auto over_budget = [&](size_t count) {
    std::lock_guard lock(mutex_);
    if (rules_.size() + rules_prepared_ + count <= kPreparedRulesBudget) return false;
    ++files_not_prepared_;
    return true;
  };
  std::optional<RuleSource> source;
  std::optional<PreparedRules> cached;
  if (cache_ && (source = source_of_mapped())) cached = cache_->load(*source, kPreparedRulesBudget);
  uint64_t looked_up = thread_cpu_us(), swept = looked_up, derived = looked_up;
  std::vector<mt_rule_key> keys;
  std::vector<mt_unwind_rule> rules;
  if (cached) {
    if (over_budget(cached->offsets.size())) return;
    keys.reserve(cached->offsets.size());
    for (uint64_t offset : cached->offsets) keys.push_back({file_id, 0, offset});
    rules = std::move(cached->rules);
  } else {
    std::vector<uint64_t> offsets;
    try {
      offsets = return_address_offsets(path);
    } catch (const std::exception&) {
      return;  // rules are then learned from misses
    }
    if (over_budget(offsets.size())) return;
    swept = thread_cpu_us();
    std::vector<std::optional<mt_unwind_rule>> derived_rules = cfi->rules_at_return_addresses(offsets);
    PreparedRules kept;
    for (size_t i = 0; i < offsets.size(); ++i) {
      if (derived_rules[i]) {
        keys.push_back({file_id, 0, offsets[i]});
        kept.offsets.push_back(offsets[i]);
        kept.rules.push_back(*derived_rules[i]);
      }
    }
    derived = thread_cpu_us();
    if (source) {
      auto after = source_of_mapped();
      if (after && after->build_id == source->build_id && after->file_size == source->file_size &&
          after->cfi_hash == source->cfi_hash)
        cache_->store(*source, kept);
    }
    rules = std::move(kept.rules);
  }
  uint64_t stored = thread_cpu_us();
  std::lock_guard lock(mutex_);
  File& file = files_[file_id];
  if (shared_) shared_->add_file_rules(keys, rules);
  rules_prepared_ += keys.size();
  file.prepared_keys = std::move(keys);
  file.prepared_rules = std::move(rules);
  // Interposed processes walk with the shared table alone: on the fast path
  // the kernel gets the file's rules when its own walk first needs them.
  if (!shared_) file.kernel_share.kernel_needs();
  if (file.kernel_share.prepared()) give_kernel_prepared(file);
  uint64_t given = thread_cpu_us();
  prepare_cache_us_ += (looked_up - started) + (stored - derived);
  prepare_sweep_us_ += swept - looked_up;
  prepare_derive_us_ += derived - swept;
  prepare_give_us_ += given - stored;
  ++files_prepared_;
  if (cached) ++cache_hits_;
  if (cache_) {
    cache_rejected_ = cache_->rejected();
    cache_stored_ = cache_->stored();
  }
}

void UnwindLearner::give_kernel_prepared(File& file) {
  size_t stored = session_.add_unwind_rules(file.prepared_keys, file.prepared_rules);
  rules_not_stored_ += file.prepared_keys.size() - stored;
  if (shared_) kernel_rules_deferred_given_ += stored;
}

void UnwindLearner::learn_path(pid_t pid, const StackDefinition& stack, bool stopped, bool for_kernel) {
  std::lock_guard lock(mutex_);
  // The kernel's walk goes on past the copy on the live stack, so the path
  // may miss rules beyond the copy: while the thread waits stopped in the
  // allocator's entry its callers' frames are as the kernel saw them, and
  // the words past the copy are read from the process.
  auto word_at = [&](uint64_t address, uint64_t* out) {
    if (address < stack.sp || (address - stack.sp) % 8 != 0) return false;
    if (address - stack.sp + 8 <= stack.bytes.size()) {
      std::memcpy(out, stack.bytes.data() + (address - stack.sp), 8);
      return true;
    }
    if (!stopped || address - stack.sp > kMaxLiveStackBytes) return false;
    iovec local{out, 8}, remote{reinterpret_cast<void*>(address), 8};
    return process_vm_readv(pid, &local, 1, &remote, 1, 0) == 8;
  };
  // A process that will be interposed walks in the kernel only until then
  // (the loader, constructors): the path's rules do. Others walk there for
  // good: the whole of each file they pass through.
  KernelShare share = !for_kernel               ? KernelShare::None
                      : interposing_.count(pid) ? KernelShare::Rule
                                                : KernelShare::File;
  if (stack.miss_pc != 0) rule_for(pid, stack.miss_pc, share);
  // The kernel's walk (bpf/stack.bpf.h), over the same stack.
  uint64_t pc, cfa = stack.sp + 8, rbp = stack.regs.size() > 6 ? stack.regs[6] : 0;
  if (!word_at(stack.sp, &pc)) return;
  for (int frame = 0; frame < MT_MAX_FRAMES; ++frame) {
    std::optional<mt_unwind_rule> rule = rule_for(pid, pc, share);
    if (!rule || rule->flags & (MT_RULE_OUTERMOST | MT_RULE_UNSUPPORTED)) return;
    uint64_t next_cfa = (rule->cfa_reg == MT_CFA_RBP ? rbp : cfa) + static_cast<int64_t>(rule->cfa_offset);
    if (next_cfa <= cfa || !word_at(next_cfa - 8, &pc)) return;
    if ((rule->flags & MT_RULE_RBP_SAVED) && !word_at(next_cfa + static_cast<int64_t>(rule->rbp_offset), &rbp))
      return;
    if (pc == 0) return;
    cfa = next_cfa;
  }
}

std::map<std::string, uint64_t> UnwindLearner::counters() const {
  std::lock_guard lock(mutex_);
  return {
      {"unwind_rules_learned", rules_learned_},
      {"unwind_learner_failures", failures_},
      {"unwind_rules_without_cfi", rules_without_cfi_},
      {"unwind_rules_prepared", rules_prepared_},
      {"unwind_rules_not_stored", rules_not_stored_},
      {"unwind_files_prepared", files_prepared_},
      {"unwind_files_not_prepared", files_not_prepared_},
      {"unwind_files_unprepared_at_end", files_unprepared_at_end_},
      {"module_tables_refreshed", tables_refreshed_},
      {"modules_beyond_table", modules_dropped_},
      {"unwind_prepare_sweep_us", prepare_sweep_us_},
      {"unwind_prepare_derive_us", prepare_derive_us_},
      {"unwind_prepare_give_us", prepare_give_us_},
      {"unwind_rules_given_kernel_on_miss", kernel_rules_deferred_given_},
      {"unwind_cache_hits", cache_hits_},
      {"unwind_cache_rejected", cache_rejected_},
      {"unwind_cache_stored", cache_stored_},
      {"unwind_prepare_cache_us", prepare_cache_us_},
  };
}

}  // namespace memtrack
