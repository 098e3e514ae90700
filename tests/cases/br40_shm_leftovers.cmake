# root only (mount and IPC namespaces): exit 77 = skipped. ~7 s (gcc, 20
# repetitions of (e)); the sanitizer build repeats (e) 5 times (a run costs
# seconds there; no hwloc PCI discovery, see helper_iface.cmake);
# BR40_RUNS=200 by hand.
set(_env "COLL_SOCKET_IFNAME=lo")
if(COLL_SANITIZE)
  set(_env "COLL_SOCKET_IFNAME=lo;BR40_RUNS=5;HWLOC_COMPONENTS=-pci")
endif()
set_tests_properties(cases.br40_shm_leftovers PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 ENVIRONMENT "${_env}")
