# helper_iface.cmake - the rank program of the interface cases (br25, br26,
# br45): included by their <name>.cmake, defined once.
if(NOT TARGET case_iface_rank)
  add_executable(case_iface_rank ${CMAKE_CURRENT_LIST_DIR}/helper_iface_rank.c)
  target_link_libraries(case_iface_rank PRIVATE coll)
endif()
# Environment of the interface cases: none of the defaults (they must not
# inherit COLL_SOCKET_IFNAME=lo). Sanitizer build: without hwloc's PCI
# discovery (libpciaccess reads pci.ids with thousands of growing reallocs,
# each an mmap/munmap under ASan: ~5 s per rank process on a loaded 2-core VM;
# these cases do not use PCI locality).
set(_env "")
if(COLL_SANITIZE)
  set(_env "HWLOC_COMPONENTS=-pci")
endif()
