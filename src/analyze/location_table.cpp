#include "analyze/location_table.h"

#include <algorithm>

#include "util/hex.h"

namespace memtrack {

uint32_t LocationTable::in_module(uint32_t module, uint64_t file_offset, uint64_t address, bool exact) {
  return intern(module, file_offset, address, exact);
}

uint32_t LocationTable::unmapped(uint64_t address, bool exact) { return intern(-1, address, address, exact); }

uint32_t LocationTable::python(uint64_t code, uint32_t instruction) {
  auto [it, added] = python_index_.try_emplace(std::pair{code, instruction}, static_cast<uint32_t>(locations_.size()));
  if (added) {
    ProfileLocation location;
    location.address = code;
    location.file_offset = instruction;
    location.python = true;
    locations_.push_back(location);
    catalog_module_.push_back(-1);
  }
  return it->second;
}

uint32_t LocationTable::intern(int64_t module, uint64_t offset_or_address, uint64_t address, bool exact) {
  auto [it, added] = index_.try_emplace(std::tuple{module, offset_or_address, exact},
                                        static_cast<uint32_t>(locations_.size()));
  if (added) {
    ProfileLocation location;
    location.address = address;
    location.file_offset = module >= 0 ? offset_or_address : 0;
    location.exact = exact;
    locations_.push_back(location);
    catalog_module_.push_back(module);
  }
  return it->second;
}

std::vector<ProfileModule> LocationTable::symbolize(ModuleCatalog& catalog, const std::string& main_executable,
                                                    const PythonCodes& python_codes) {
  std::vector<ProfileModule> modules;
  std::vector<int32_t> profile_module(catalog.size(), -1);
  auto first = std::find_if(catalog_module_.begin(), catalog_module_.end(), [&](int64_t module) {
    return module >= 0 && catalog.module(static_cast<uint32_t>(module)).ref.path == main_executable;
  });
  std::vector<size_t> order;
  if (first != catalog_module_.end()) order.push_back(static_cast<size_t>(first - catalog_module_.begin()));
  for (size_t i = 0; i < locations_.size(); ++i) order.push_back(i);
  for (size_t i : order) {
    if (locations_[i].python) {
      locations_[i].frames = python_codes.frames(locations_[i].address, static_cast<uint32_t>(locations_[i].file_offset));
      continue;
    }
    if (catalog_module_[i] < 0) continue;
    auto index = static_cast<uint32_t>(catalog_module_[i]);
    if (profile_module[index] < 0) {
      const ModuleCatalog::Module& module = catalog.module(index);
      ProfileModule out;
      out.path = module.ref.path;
      out.build_id = hex(module.ref.build_id);
      out.start = module.start;
      out.limit = module.limit;
      out.file_offset = module.file_offset;
      profile_module[index] = static_cast<int32_t>(modules.size());
      modules.push_back(out);
    }
    ProfileLocation& location = locations_[i];
    location.module = profile_module[index];
    uint64_t offset = location.file_offset;
    if (!location.exact && offset > 0) --offset;  // the call instruction precedes the return address
    location.frames = catalog.symbolizer().symbolize(catalog.symbolizer_id(index), offset);
    if (!location.frames.empty()) modules[static_cast<size_t>(location.module)].symbolized = true;
  }
  return modules;
}

}  // namespace memtrack
