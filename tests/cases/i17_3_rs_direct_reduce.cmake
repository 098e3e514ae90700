# i17_3_rs_direct_reduce: the ring schedule for every call over shm, single
# copy forced on from 4 KiB (cases.i17_3_rs_direct_reduce) and off
# (cases.i17_3_rs_direct_reduce.ring: every message through the ring's slots).
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 300
  ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_ALGO=ring;COLL_MAILBOX_BYTES=0;COLL_SHM_CMA_THRESHOLD=4096")
add_test(NAME cases.${name}.ring COMMAND case_${name})
set_tests_properties(cases.${name}.ring PROPERTIES TIMEOUT 300 LABELS cases
  ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_ALGO=ring;COLL_MAILBOX_BYTES=0;COLL_SHM_CMA_THRESHOLD=0")
