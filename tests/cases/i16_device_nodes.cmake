# Device buffers between two emulated nodes (COLL_HOSTID per process, set by
# the case) over the test transport plugin net_gdr (a NIC that reads GPU
# memory through dma-buf, tests/unit/plugins) on the fake CUDA driver
# (tests/fakecuda): skips (77) where no driver can be loaded.
# COLL_CHUNKSIZE=4096 makes the 5000-element calls several slices.
include(${CMAKE_CURRENT_SOURCE_DIR}/helper_fail.cmake)
add_library(coll_net_gdr MODULE ${CMAKE_SOURCE_DIR}/tests/unit/plugins/net_gdr.c)
target_include_directories(coll_net_gdr PRIVATE ${CMAKE_SOURCE_DIR}/include)
set_target_properties(coll_net_gdr PROPERTIES C_VISIBILITY_PRESET hidden)
target_compile_definitions(case_${name} PRIVATE COLL_NET_GDR_PLUGIN="$<TARGET_FILE:coll_net_gdr>")
target_link_libraries(case_${name} PRIVATE ${CMAKE_DL_LIBS})
add_dependencies(case_${name} coll_net_gdr)
set(_i16n_env "COLL_SOCKET_IFNAME=lo;COLL_CHUNKSIZE=4096;COLL_NET_PLUGIN=$<TARGET_FILE:coll_net_gdr>")
set(_i16n_env "${_i16n_env};COLL_CUDA_LIBRARY=$<$<TARGET_EXISTS:collfakecuda>:$<TARGET_FILE:collfakecuda>>$<$<NOT:$<TARGET_EXISTS:collfakecuda>>:libcuda.so.1>")
set_tests_properties(cases.${name} PROPERTIES SKIP_RETURN_CODE 77 LABELS "cases;fakecuda" ENVIRONMENT "${_i16n_env}")
# name | arguments | extra environment
foreach(_r "procs2|run,2|" "nogpu|run,4,nogpu|" "nogdr|run,4,staged|COLL_NET_GDR=0" "dead|dead|")
  string(REPLACE "|" ";" _r "${_r}")
  list(GET _r 0 _t)
  list(GET _r 1 _a)
  list(LENGTH _r _len)
  set(_e "${_i16n_env}")
  if(_len GREATER 2)
    list(GET _r 2 _x)
    if(_x)
      set(_e "${_e};${_x}")
    endif()
  endif()
  string(REPLACE "," ";" _a "${_a}")
  add_test(NAME cases.${name}.${_t} COMMAND case_${name} ${_a})
  set_tests_properties(cases.${name}.${_t} PROPERTIES TIMEOUT 300 LABELS "cases;fakecuda" SKIP_RETURN_CODE 77
                       ENVIRONMENT "${_e}")
endforeach()
