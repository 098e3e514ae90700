# i17_3_allgather_cma_refused: single copy on (COLL_SHM_CMA_THRESHOLD set: not
# this machine's measurement), so the refused read is what turns it off.
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 120
                     ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_SHM_CMA_THRESHOLD=262144")
