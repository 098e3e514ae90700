# root only (mount namespace): exit 77 = skipped. ~10 s (gcc); the sanitizer
# build runs the recipe's counts divided by 4, without hwloc's PCI discovery
# (see helper_iface.cmake).
set(_env "COLL_SOCKET_IFNAME=lo")
if(COLL_SANITIZE)
  set(_env "COLL_SOCKET_IFNAME=lo;BR22_SCALE=4;HWLOC_COMPONENTS=-pci")
endif()
set_tests_properties(cases.br22_shm_size PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 ENVIRONMENT "${_env}")
