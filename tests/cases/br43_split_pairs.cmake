# A call that waits on a peer fails after 30 s, not the default 30 minutes.
set_tests_properties(cases.${name} PROPERTIES ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_TIMEOUT=30")
