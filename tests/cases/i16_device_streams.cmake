# Stream semantics and error paths of device calls, on the fake CUDA driver
# (tests/fakecuda); each mode but nodriver skips (77) without a driver.
set(_i16_env "COLL_SOCKET_IFNAME=lo")
# the fake driver when it is built (tests/fakecuda: added after this
# directory, hence the generator expression), else the system's
set(_i16_env "${_i16_env};COLL_CUDA_LIBRARY=$<$<TARGET_EXISTS:collfakecuda>:$<TARGET_FILE:collfakecuda>>$<$<NOT:$<TARGET_EXISTS:collfakecuda>>:libcuda.so.1>")
# the default test: no driver library at all
set_tests_properties(cases.${name} PROPERTIES ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_CUDA_LIBRARY=/nonexistent/libcuda.so.1")
foreach(_v "semantics;FAKECUDA_DELAY_US=100000" "gpu;FAKECUDA_DEVICES=2" "cudafail;COLL_P2P_DISABLE=1" "deadpeer;")
  list(GET _v 0 _m)
  list(GET _v 1 _e)
  add_test(NAME cases.${name}.${_m} COMMAND case_${name} ${_m})
  set_tests_properties(cases.${name}.${_m} PROPERTIES TIMEOUT 180 LABELS cases SKIP_RETURN_CODE 77
                       ENVIRONMENT "${_i16_env};${_e}")
endforeach()
