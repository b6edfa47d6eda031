// The code addresses of a profile's call paths, each interned once and
// symbolized once at the end.
//
// Ownership and rules:
// - LocationTable owns the profile's locations (ProfileLocation, by index)
//   until take(); an index names a location for the table's life.
// - A location is (catalog module, file offset, exact) inside a mapped file,
//   or (address, exact) outside every mapping: the same code in two
//   processes, or two placements of one file, is one location.
// - A Python frame's location is (code object id, instruction), named at
//   symbolize() by the recording's code objects.
// - `exact`: an instruction to symbolize as it is; otherwise a return
//   address, symbolized at the call before it (offset - 1).
// - symbolize() once, after every Module record: the modules used by a
//   location become the profile's, the main executable first (pprof shows
//   the first mapping as the main binary), then in order of first use.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "analyze/module_catalog.h"
#include "analyze/profile.h"
#include "analyze/python_codes.h"

namespace memtrack {

class LocationTable {
 public:
  // In the catalog's module `module` at `file_offset`.
  uint32_t in_module(uint32_t module, uint64_t file_offset, uint64_t address, bool exact);
  // Outside every mapping.
  uint32_t unmapped(uint64_t address, bool exact);
  // A Python frame: code object `code` at `instruction`.
  uint32_t python(uint64_t code, uint32_t instruction);

  // Fills each location's module and frames; returns the profile's modules.
  std::vector<ProfileModule> symbolize(ModuleCatalog& catalog, const std::string& main_executable,
                                       const PythonCodes& python_codes);
  std::vector<ProfileLocation> take() { return std::move(locations_); }

 private:
  uint32_t intern(int64_t module, uint64_t offset_or_address, uint64_t address, bool exact);

  std::vector<ProfileLocation> locations_;
  std::vector<int64_t> catalog_module_;  // per location; -1 outside every mapping
  absl::flat_hash_map<std::tuple<int64_t, uint64_t, bool>, uint32_t> index_;
  absl::flat_hash_map<std::pair<uint64_t, uint32_t>, uint32_t> python_index_;
};

}  // namespace memtrack
