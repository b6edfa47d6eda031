add_library(memtrack_probe_sites STATIC
  ${CMAKE_CURRENT_LIST_DIR}/allocator_symbols.cpp
  ${CMAKE_CURRENT_LIST_DIR}/probe_placement.cpp
)
target_include_directories(memtrack_probe_sites PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(memtrack_probe_sites PUBLIC memtrack_module memtrack_wire PkgConfig::LIBELF PkgConfig::CAPSTONE)
