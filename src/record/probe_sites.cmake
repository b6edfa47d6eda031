# Allocator entry points of ELF files and their probe placement
# (included from src/record/CMakeLists.txt).
add_library(memtrack_probe_sites STATIC
  ${CMAKE_CURRENT_LIST_DIR}/allocator_symbols.cpp
  ${CMAKE_CURRENT_LIST_DIR}/elf_file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/probe_placement.cpp
)
target_link_libraries(memtrack_probe_sites PUBLIC PkgConfig::LIBELF PkgConfig::CAPSTONE)
