# Device-resident collectives on the fake CUDA driver (tests/fakecuda): the
# case skips (77) where no driver can be loaded. COLL_CHUNKSIZE=4096 makes
# the 5000-element calls several slices on several channels.
include(${CMAKE_CURRENT_SOURCE_DIR}/helper_fail.cmake)
set_tests_properties(cases.${name} PROPERTIES SKIP_RETURN_CODE 77)
set(_i16p_env "COLL_SOCKET_IFNAME=lo;COLL_CHUNKSIZE=4096")
set(_i16p_env "${_i16p_env};COLL_CUDA_LIBRARY=$<$<TARGET_EXISTS:collfakecuda>:$<TARGET_FILE:collfakecuda>>$<$<NOT:$<TARGET_EXISTS:collfakecuda>>:libcuda.so.1>")
set_tests_properties(cases.${name} PROPERTIES ENVIRONMENT "${_i16p_env}")
# name | arguments | extra environment
set(_i16p_runs "threads3|threads,3|" "procs2|procs,2|" "fault_kill|fault,kill|" "fault_copy|fault,copy|"
               "fault_kernel|fault,kernel|")
if(NOT COLL_SANITIZE)
  list(APPEND _i16p_runs "procs4|procs,4|" "nostage|procs,2,nostage|FAKECUDA_FAIL=cuMemHostAlloc:2"
       "delay|threads,2,delay|FAKECUDA_DELAY_US=200")
endif()
foreach(_r ${_i16p_runs})
  string(REPLACE "|" ";" _r "${_r}")
  list(GET _r 0 _t)
  list(GET _r 1 _a)
  list(LENGTH _r _len)
  set(_e "${_i16p_env}")
  if(_len GREATER 2)
    list(GET _r 2 _x)
    if(_x)
      set(_e "${_e};${_x}")
    endif()
  endif()
  string(REPLACE "," ";" _a "${_a}")
  add_test(NAME cases.${name}.${_t} COMMAND case_${name} ${_a})
  set_tests_properties(cases.${name}.${_t} PROPERTIES TIMEOUT 300 LABELS cases SKIP_RETURN_CODE 77
                       ENVIRONMENT "${_e}")
endforeach()
