# Issue 14.3 in each data path: shared memory with the mailbox (default), shared
# memory with the mailbox off (every call runs its schedule), and TCP.
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 600)
foreach(_v nomailbox tcp)
  if(_v STREQUAL "nomailbox")
    set(_env "COLL_MAILBOX_BYTES=0")
  else()
    set(_env "COLL_SHM_DISABLE=1")
  endif()
  add_test(NAME cases.${name}.${_v} COMMAND case_${name})
  set_tests_properties(cases.${name}.${_v} PROPERTIES TIMEOUT 600 LABELS cases
                       ENVIRONMENT "COLL_SOCKET_IFNAME=lo;${_env}")
endforeach()
