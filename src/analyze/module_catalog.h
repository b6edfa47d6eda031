// Every mapped file of a recording, once per identity (build id, else device
// and inode), with what offline analysis has of it: the file located now
// (sysroot, debug dirs, embedded Module records), its CFI for the unwinder
// (opened on first use) and its symbolizer handle.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "format/event.h"
#include "format/module_info.h"
#include "module/module_identity.h"
#include "symbolize/symbolizer.h"
#include "unwind/stack_unwinder.h"

namespace memtrack {

class ModuleCatalog {
 public:
  explicit ModuleCatalog(SymbolizerOptions options);

  struct Module {
    ModuleRef ref;
    // The first placement seen (the profile's mapping range).
    uint64_t start = 0, limit = 0, file_offset = 0;
    std::unique_ptr<UnwindModule> unwind;  // null when no CFI could be read
    bool unwind_tried = false;
    std::string unwind_problem;  // why `unwind` is null
    std::optional<Symbolizer::ModuleId> symbolizer_id;
  };

  // The module of a mapping (added on first sight). Stable index.
  uint32_t index_of(const MappingInfo& mapping, uint64_t start);
  // The same, remembered per mapping object: the report asks it for every
  // frame of every call path, and an identity is a key of vectors and strings.
  uint32_t index_of(const std::shared_ptr<const MappingInfo>& mapping, uint64_t start);
  Module& module(uint32_t index) { return *modules_[index]; }
  size_t size() const { return modules_.size(); }
  // The module's CFI, opened on first use; null when unavailable (the reason
  // is kept for warnings()).
  const UnwindModule* unwind_module(uint32_t index);
  // A Module record of the artifact: used for files not found on disk.
  // (The recorder writes them last: they serve symbolization, and unwinding
  // only of the stacks that come after them.)
  void add_embedded(const ModuleInfo& info);
  // The module's symbolizer handle, made on first use (after every Module
  // record was seen, so it knows its embedded symbols).
  Symbolizer::ModuleId symbolizer_id(uint32_t index);

  Symbolizer& symbolizer() { return symbolizer_; }
  // Files not found or without CFI, each once; the symbolizer's warnings.
  std::vector<std::string> warnings() const;

 private:
  SymbolizerOptions options_;
  Symbolizer symbolizer_;
  std::map<ModuleIdentity, uint32_t> index_by_identity_;
  // Holding the mapping keeps its address from naming another one.
  absl::flat_hash_map<const MappingInfo*, std::pair<std::shared_ptr<const MappingInfo>, uint32_t>> index_by_mapping_;
  std::vector<std::unique_ptr<Module>> modules_;
  std::map<ModuleIdentity, std::unique_ptr<ModuleInfo>> embedded_;
};

}  // namespace memtrack
