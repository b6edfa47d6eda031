# Build-time: from LIB (with DWARF), in OUT:
#   stripped/<name>                 strip --strip-all (.dynsym only), with a .gnu_debuglink
#   link/<stem>.debug               objcopy --only-keep-debug, found by the debug link
#   debug/.build-id/xx/yyyy.debug   the same, found by build id
# Run: cmake -DLIB= -DOUT= -DOBJCOPY= -DSTRIP= -DREADELF= -P debug_tree.cmake
get_filename_component(name "${LIB}" NAME)
get_filename_component(stem "${LIB}" NAME_WE)
file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}/stripped" "${OUT}/link")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${ARGN}: ${status} ${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

set(debug "${OUT}/link/${stem}.debug")
run("${OBJCOPY}" --only-keep-debug "${LIB}" "${debug}")
run("${STRIP}" --strip-all -o "${OUT}/stripped/${name}" "${LIB}")
# The CRC is of the debug file as written above.
run("${OBJCOPY}" "--add-gnu-debuglink=${debug}" "${OUT}/stripped/${name}")

run("${READELF}" -n "${LIB}")
if(NOT run_output MATCHES "Build ID: ([0-9a-f][0-9a-f])([0-9a-f]+)")
  message(FATAL_ERROR "${LIB} has no build id")
endif()
file(MAKE_DIRECTORY "${OUT}/debug/.build-id/${CMAKE_MATCH_1}")
file(COPY_FILE "${debug}" "${OUT}/debug/.build-id/${CMAKE_MATCH_1}/${CMAKE_MATCH_2}.debug")
file(TOUCH "${OUT}/stamp")
