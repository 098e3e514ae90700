# A call that waits on a peer fails after 30 s, not the default 30 minutes.
# Variants: TCP instead of shared memory; four channels with 1 KiB slices
# (each transfer striped over the channels, empty ones on channel 0 only).
# The variants run in the gcc build only.
set_tests_properties(cases.${name} PROPERTIES ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_TIMEOUT=30")
if(COLL_SANITIZE)
  return()
endif()
set(_br21_tcp "COLL_SHM_DISABLE=1")
set(_br21_channels4 "COLL_NCHANNELS=4;COLL_CHUNKSIZE=1024")
foreach(_tag tcp channels4)
  add_test(NAME cases.${name}.${_tag} COMMAND case_${name})
  set_tests_properties(cases.${name}.${_tag} PROPERTIES TIMEOUT 300 LABELS cases
                       ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_TIMEOUT=30;${_br21_${_tag}}")
endforeach()
