# Staged all-gather and reduce-scatter pipelined (issue 16), on the fake CUDA
# driver (tests/fakecuda): the case skips (77) where no driver can be loaded.
# Over tcp (no shm) with the device-resident path off, so that every call is
# staged; 64 KiB pieces; the fake lets a process hold 1 MiB of pinned memory.
set(_i16pp_env "COLL_SOCKET_IFNAME=lo;COLL_SHM_DISABLE=1;COLL_P2P_DISABLE=1;COLL_CUDA_STAGE_CHUNK=65536")
set(_i16pp_env "${_i16pp_env};FAKECUDA_PINNED_KB=1024")
set(_i16pp_env "${_i16pp_env};COLL_CUDA_LIBRARY=$<$<TARGET_EXISTS:collfakecuda>:$<TARGET_FILE:collfakecuda>>$<$<NOT:$<TARGET_EXISTS:collfakecuda>>:libcuda.so.1>")
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 300 LABELS cases SKIP_RETURN_CODE 77 ENVIRONMENT "${_i16pp_env}")
foreach(_n 3 4)
  add_test(NAME cases.${name}.procs${_n} COMMAND case_${name} ${_n})
  set_tests_properties(cases.${name}.procs${_n} PROPERTIES TIMEOUT 300 LABELS cases SKIP_RETURN_CODE 77
                       ENVIRONMENT "${_i16pp_env}")
endforeach()
# procs3_no2d: a driver without cuMemcpy2DAsync (optional): one copy per segment
add_test(NAME cases.${name}.procs3_no2d COMMAND case_${name} 3)
set_tests_properties(cases.${name}.procs3_no2d PROPERTIES TIMEOUT 300 LABELS cases SKIP_RETURN_CODE 77
                     ENVIRONMENT "${_i16pp_env};FAKECUDA_MISSING=cuMemcpy2DAsync")
