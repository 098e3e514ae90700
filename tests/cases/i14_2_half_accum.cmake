# Issue 14.2 with the mailbox off, over TCP, and with every reducing algorithm
# forced (the float32 partial results must survive every schedule's wire).
function(coll_i14_2_variant suffix)
  add_test(NAME cases.${name}.${suffix} COMMAND case_${name})
  set_tests_properties(cases.${name}.${suffix} PROPERTIES TIMEOUT 300 LABELS cases ENVIRONMENT "${ARGN}")
endfunction()
coll_i14_2_variant(nomailbox "COLL_SOCKET_IFNAME=lo;COLL_MAILBOX_BYTES=0")
coll_i14_2_variant(tcp "COLL_SOCKET_IFNAME=lo;COLL_SHM_DISABLE=1")
coll_i14_2_variant(tree "COLL_SOCKET_IFNAME=lo;COLL_MAILBOX_BYTES=0;COLL_ALGO=allreduce:tree\\;reduce:binomial")
coll_i14_2_variant(rhd "COLL_SOCKET_IFNAME=lo;COLL_MAILBOX_BYTES=0;COLL_ALGO=allreduce:rhd\\;reducescatter:rhd")
coll_i14_2_variant(direct "COLL_SOCKET_IFNAME=lo;COLL_MAILBOX_BYTES=0;COLL_ALGO=allreduce:direct\\;reducescatter:direct")
