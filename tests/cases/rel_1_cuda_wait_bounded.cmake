# Bounded CUDA waits on the fake driver (tests/fakecuda): each mode hangs one
# stream operation (FAKECUDA_HANG) and skips (77) without a driver.
set(_rel1_drv "COLL_CUDA_LIBRARY=$<$<TARGET_EXISTS:collfakecuda>:$<TARGET_FILE:collfakecuda>>$<$<NOT:$<TARGET_EXISTS:collfakecuda>>:libcuda.so.1>")
# every mode tests the staged path (COLL_P2P_DISABLE=1: no device-resident
# path); the test without an argument is mode staged
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 90 LABELS "cases;fakecuda" SKIP_RETURN_CODE 77
                     ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_P2P_DISABLE=1;${_rel1_drv};FAKECUDA_HANG=cuMemcpyAsync:1")
foreach(_v "piped;FAKECUDA_HANG=cuMemcpyAsync:1;COLL_CUDA_STAGE_CHUNK=65536"
           "piped_ag;FAKECUDA_HANG=cuMemcpyAsync:3;COLL_CUDA_STAGE_CHUNK=65536"
           "legacy;FAKECUDA_HANG=cuMemsetD8Async:1" "abort;FAKECUDA_HANG=cuMemcpyAsync:1;COLL_TIMEOUT=0"
           "backoff;FAKECUDA_HANG=cuMemsetD8Async:1")
  list(GET _v 0 _m)
  list(REMOVE_AT _v 0)
  add_test(NAME cases.${name}.${_m} COMMAND case_${name} ${_m})
  set_tests_properties(cases.${name}.${_m} PROPERTIES TIMEOUT 90 LABELS "cases;fakecuda" SKIP_RETURN_CODE 77
                       ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_P2P_DISABLE=1;${_rel1_drv};${_v}")
endforeach()
