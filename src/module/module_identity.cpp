#include "module/module_identity.h"

namespace memtrack {

ModuleIdentity mapping_identity(const std::vector<uint8_t>& build_id, uint64_t dev, uint64_t ino,
                                const std::string& path) {
  if (!build_id.empty()) return {build_id, 0, 0, ""};
  if (dev != 0 || ino != 0) return {{}, dev, ino, ""};
  return {{}, 0, 0, path};
}

ModuleIdentity identity_of(const MappingInfo& mapping) {
  return mapping_identity(mapping.build_id, mapping.dev, mapping.ino, mapping.path);
}

ModuleIdentity identity_of(const ModuleInfo& module) {
  if (module.dev != 0 || module.ino != 0) return {{}, module.dev, module.ino, ""};
  if (!module.build_id.empty()) return {module.build_id, 0, 0, ""};
  return {{}, 0, 0, module.path};
}

}  // namespace memtrack
