// A persistent cache of the unwind rules the learner prepares for a whole
// file (call paths): the call-site scan and the CFI evaluation of a big
// file (cc1plus: 518,000 rules, ~0.3-0.4 s of CPU) are done once per build of
// that file, not at every recording that maps it.
//
// One entry per file, named by its GNU build id, in a directory owned by the
// user memtrack runs as (default $XDG_CACHE_HOME/memtrack/unwind-rules, else
// $HOME/.cache/memtrack/unwind-rules). An entry is used only when everything
// it was derived from matches: the file's build id and size, a hash of its
// CFI sections (.eh_frame, .eh_frame_hdr, .debug_frame) and executable
// segment headers, and the build id of the memtrack executable that derived
// it (a memtrack that derives rules differently never reads another's).
// Nothing read is trusted blindly: the directory and the entry must be owned
// by the user and writable by nobody else, the entry is opened without
// following symbolic links, has exactly the size its header says, its
// contents hash to the value stored, its offsets ascend inside the file and
// each rule is one the walkers can have. Entries are written to a new file in
// the directory and renamed over the name (a symbolic link there is replaced,
// never followed). Anything wrong: the entry is not used and the file's rules
// are derived as without a cache.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wire/unwind_rule.h"

namespace memtrack {

// What a file's prepared rules were derived from.
struct RuleSource {
  std::vector<uint8_t> build_id;  // the file's GNU build id
  uint64_t file_size = 0;
  uint64_t cfi_hash = 0;  // CFI sections and executable segment headers
  // The file read (stat's st_dev, st_ino): the learner checks it is the one
  // mapped. Not part of the entry (a copy of the file shares its rules).
  uint64_t dev = 0, ino = 0;
};

// A file's prepared rules: return address file offsets, ascending, and the
// rule of each.
struct PreparedRules {
  std::vector<uint64_t> offsets;
  std::vector<mt_unwind_rule> rules;
};

class RuleCache {
 public:
  // The default directory (empty when neither XDG_CACHE_HOME nor HOME is an
  // absolute path).
  static std::string default_dir();
  // Opens `dir`, creating it and missing parents (0700). Null, with `why`,
  // when it is not a directory of ours that nobody else can write (a
  // symbolic link as its last component included), or when memtrack's own
  // executable has no build id.
  static std::unique_ptr<RuleCache> open(const std::string& dir, std::string* why = nullptr);
  ~RuleCache();
  RuleCache(const RuleCache&) = delete;
  RuleCache& operator=(const RuleCache&) = delete;

  // What the rules of the ELF file at `path` derive from; nullopt when it
  // cannot be read or has no build id (such files are not cached).
  static std::optional<RuleSource> source_of(const std::string& path);

  // The entry for `source`, validated; nullopt when missing or rejected
  // (counted in rejected()).
  std::optional<PreparedRules> load(const RuleSource& source, uint64_t max_rules);
  // Writes the entry (best effort: a failure leaves the cache as it was).
  void store(const RuleSource& source, const PreparedRules& rules);

  uint64_t rejected() const { return rejected_; }
  uint64_t stored() const { return stored_; }

 private:
  RuleCache(int dir_fd, std::vector<uint8_t> self_id) : dir_fd_(dir_fd), self_id_(std::move(self_id)) {}
  int dir_fd_;
  std::vector<uint8_t> self_id_;  // memtrack's own build id
  uint64_t rejected_ = 0, stored_ = 0;
};

}  // namespace memtrack
