# The memory-type rule on the fake CUDA driver (tests/fakecuda) with two
# GPUs; the modes but nodriver skip (77) without a driver.
set(_rel2_env "COLL_SOCKET_IFNAME=lo;FAKECUDA_DEVICES=2;COLL_CUDA_LIBRARY=$<$<TARGET_EXISTS:collfakecuda>:$<TARGET_FILE:collfakecuda>>$<$<NOT:$<TARGET_EXISTS:collfakecuda>>:libcuda.so.1>")
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 120 LABELS "cases;fakecuda" SKIP_RETURN_CODE 77
                     ENVIRONMENT "${_rel2_env}")
foreach(_v "queryfail;FAKECUDA_FAIL=cuPointerGetAttributes:1" "bindfail;FAKECUDA_FAIL=cuStreamCreate:1"
           "nodriver;COLL_CUDA_LIBRARY=/nonexistent/libcuda.so.1")
  list(GET _v 0 _m)
  list(REMOVE_AT _v 0)
  add_test(NAME cases.${name}.${_m} COMMAND case_${name} ${_m})
  set_tests_properties(cases.${name}.${_m} PROPERTIES TIMEOUT 120 LABELS "cases;fakecuda" SKIP_RETURN_CODE 77
                       ENVIRONMENT "${_rel2_env};${_v}")
endforeach()
