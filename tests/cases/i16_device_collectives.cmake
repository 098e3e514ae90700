# Device buffers run on the fake CUDA driver (tests/fakecuda) in CI: the
# case skips (77) where no driver can be loaded. COLL_CUDA_STAGE_CHUNK=4096
# makes the 5000-element calls several pipelined pieces.
set_tests_properties(cases.${name} PROPERTIES SKIP_RETURN_CODE 77)
set(_i16_env "COLL_SOCKET_IFNAME=lo;COLL_CUDA_STAGE_CHUNK=4096")
# the fake driver when it is built (tests/fakecuda: added after this
# directory, hence the generator expression), else the system's
set(_i16_env "${_i16_env};COLL_CUDA_LIBRARY=$<$<TARGET_EXISTS:collfakecuda>:$<TARGET_FILE:collfakecuda>>$<$<NOT:$<TARGET_EXISTS:collfakecuda>>:libcuda.so.1>")
set_tests_properties(cases.${name} PROPERTIES ENVIRONMENT "${_i16_env}")
set(_i16_variants "threads:3" "procs:2")
if(NOT COLL_SANITIZE) # under ASan each process's init alone takes seconds: 2 and 3 ranks there
  list(APPEND _i16_variants "procs:4")
endif()
foreach(_v ${_i16_variants})
  string(REPLACE ":" ";" _v "${_v}")
  list(GET _v 0 _m)
  list(GET _v 1 _n)
  add_test(NAME cases.${name}.${_m}${_n} COMMAND case_${name} ${_m} ${_n})
  set_tests_properties(cases.${name}.${_m}${_n} PROPERTIES TIMEOUT 300 LABELS cases SKIP_RETURN_CODE 77
                       ENVIRONMENT "${_i16_env}")
endforeach()
if(COLL_SANITIZE)
  return()
endif()
# over tcp instead of shared memory; with every fake stream operation delayed; staged (the device-resident
# path off: the 5000-element calls take the staged pipeline) over tcp on 4 processes and over shm on 3 threads
# name | arguments | extra environment
foreach(_r "tcp|procs,2|COLL_SHM_DISABLE=1" "delay|threads,2|FAKECUDA_DELAY_US=1000"
           "staged_tcp4|procs,4|COLL_SHM_DISABLE=1,COLL_P2P_DISABLE=1" "staged_threads3|threads,3|COLL_P2P_DISABLE=1")
  string(REPLACE "|" ";" _r "${_r}")
  list(GET _r 0 _t)
  list(GET _r 1 _a)
  list(GET _r 2 _x)
  string(REPLACE "," ";" _a "${_a}")
  string(REPLACE "," ";" _x "${_x}")
  add_test(NAME cases.${name}.${_t} COMMAND case_${name} ${_a})
  set_tests_properties(cases.${name}.${_t} PROPERTIES TIMEOUT 300 LABELS cases SKIP_RETURN_CODE 77
                       ENVIRONMENT "${_i16_env};${_x}")
endforeach()
