# A call that waits on a peer fails after 30 s, not the default 30 minutes.
# Variants: shared memory with single copy forced on (a send then waits until
# the receiver has read it: BR-33's reordered receives deadlocked there),
# shared memory with the smallest ring (a large send waits for the receiver
# to drain it), and TCP instead of shared memory.
set_tests_properties(cases.${name} PROPERTIES ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_TIMEOUT=30")
set(_br33_cma "COLL_SHM_CMA_THRESHOLD=4096")
set(_br33_smallring "COLL_SHM_BUFFSIZE=32768;COLL_SHM_CMA_THRESHOLD=0")
set(_br33_tcp "COLL_SHM_DISABLE=1")
# The sanitizer build runs the single-copy variant only.
set(_br33_tags cma smallring tcp)
if(COLL_SANITIZE)
  set(_br33_tags cma)
endif()
foreach(_tag ${_br33_tags})
  add_test(NAME cases.${name}.${_tag} COMMAND case_${name})
  set_tests_properties(cases.${name}.${_tag} PROPERTIES TIMEOUT 300 LABELS cases
                       ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_TIMEOUT=30;${_br33_${_tag}}")
endforeach()
