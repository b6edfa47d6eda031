// Which mapped file a record means: the one identity type and rule of
// docs/FORMAT.md, used by every consumer that groups Mapping and Module
// records per file (the recorder's --embed-modules, export-modules, the
// report's module catalog and symbolizer).
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "format/event.h"
#include "format/module_info.h"

namespace memtrack {

// A Mapping record names its file by build id, else by device (kernel
// encoding) and inode; a Module record describes the Mappings with its
// device and inode when it has them (it may carry the file's build id too),
// else those with its build id. Without either (pseudo-files like [vdso])
// the path is all there is. Exactly one of the three is set.
struct ModuleIdentity {
  std::vector<uint8_t> build_id;
  uint64_t dev = 0;
  uint64_t ino = 0;
  std::string path;
  auto operator<=>(const ModuleIdentity&) const = default;

  bool by_build_id() const { return !build_id.empty(); }
  bool by_dev_ino() const { return dev != 0 || ino != 0; }
};

ModuleIdentity identity_of(const MappingInfo& mapping);
// The same rule for a Mapping record's identifying fields.
ModuleIdentity mapping_identity(const std::vector<uint8_t>& build_id, uint64_t dev, uint64_t ino,
                                const std::string& path);
ModuleIdentity identity_of(const ModuleInfo& module);

}  // namespace memtrack
