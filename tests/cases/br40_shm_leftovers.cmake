# root only (mount and IPC namespaces): exit 77 = skipped. ~7 s (gcc, 20
# repetitions of (e)); the sanitizer build repeats (e) twice (a run costs
# seconds there); BR40_RUNS=200 by hand.
set(_env "COLL_SOCKET_IFNAME=lo")
if(COLL_SANITIZE)
  set(_env "COLL_SOCKET_IFNAME=lo;BR40_RUNS=2")
endif()
set_tests_properties(cases.br40_shm_leftovers PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 ENVIRONMENT "${_env}")
