#include "analyze/module_catalog.h"

#include <exception>

namespace memtrack {

ModuleCatalog::ModuleCatalog(SymbolizerOptions options) : options_(options), symbolizer_(std::move(options)) {}

uint32_t ModuleCatalog::index_of(const MappingInfo& mapping, uint64_t start) {
  const ModuleIdentity key = identity_of(mapping);
  auto [it, added] = index_by_identity_.try_emplace(key, static_cast<uint32_t>(modules_.size()));
  if (added) {
    auto module = std::make_unique<Module>();
    module->ref.path = mapping.path;
    module->ref.build_id = mapping.build_id;
    module->ref.dev = mapping.dev;
    module->ref.ino = mapping.ino;
    module->start = start;
    module->limit = start + mapping.len;
    module->file_offset = mapping.file_offset;
    auto embedded = embedded_.find(key);
    if (embedded != embedded_.end()) module->ref.embedded = embedded->second.get();
    // Every module met is symbolized at the end: its file is opened meanwhile.
    symbolizer_.open_ahead(module->ref);
    modules_.push_back(std::move(module));
  }
  return it->second;
}

uint32_t ModuleCatalog::index_of(const std::shared_ptr<const MappingInfo>& mapping, uint64_t start) {
  auto it = index_by_mapping_.find(mapping.get());
  if (it != index_by_mapping_.end()) return it->second.second;
  uint32_t index = index_of(*mapping, start);
  index_by_mapping_.emplace(mapping.get(), std::pair{mapping, index});
  return index;
}

void ModuleCatalog::add_embedded(const ModuleInfo& info) {
  const ModuleIdentity key = identity_of(info);
  auto& slot = embedded_[key];
  slot = std::make_unique<ModuleInfo>(info);
  auto it = index_by_identity_.find(key);
  if (it == index_by_identity_.end()) return;
  Module& module = *modules_[it->second];
  if (!module.symbolizer_id) module.ref.embedded = slot.get();
  // Its CFI can now be read from the record (StackResolver retries).
  if (module.unwind_tried && !module.unwind) module.unwind_tried = false;
}

const UnwindModule* ModuleCatalog::unwind_module(uint32_t index) {
  Module& module = *modules_[index];
  if (module.unwind_tried) return module.unwind.get();
  module.unwind_tried = true;
  module.unwind_problem.clear();
  LocatedFile located = locate_module_file(module.ref, options_);
  try {
    if (!located.path.empty()) {
      module.unwind = std::make_unique<UnwindModule>(located.path);
    } else if (module.ref.embedded) {
      module.unwind = UnwindModule::from_module_info(*module.ref.embedded);
    }
  } catch (const std::exception& e) {
    module.unwind_problem = std::string("no unwind tables for ") + module.ref.path + ": " + e.what();
  }
  if (!module.unwind && located.path.empty())
    module.unwind_problem = "no unwind tables for " + module.ref.path + ": " +
                            (located.problem.empty() ? std::string("file not found") : located.problem);
  return module.unwind.get();
}

Symbolizer::ModuleId ModuleCatalog::symbolizer_id(uint32_t index) {
  Module& module = *modules_[index];
  if (!module.symbolizer_id) module.symbolizer_id = symbolizer_.add_module(module.ref);
  return *module.symbolizer_id;
}

std::vector<std::string> ModuleCatalog::warnings() const {
  std::vector<std::string> all;
  for (const auto& module : modules_)
    if (!module->unwind_problem.empty()) all.push_back(module->unwind_problem);
  for (std::string& w : symbolizer_.warnings()) all.push_back(std::move(w));
  return all;
}

}  // namespace memtrack
