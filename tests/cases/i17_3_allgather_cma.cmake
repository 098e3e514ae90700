# i17_3_allgather_cma: the tuner's choice (single copy from 1 MiB in all);
# `off` (cases.i17_3_allgather_cma.off): COLL_SHM_CMA_THRESHOLD=0 forbids it.
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 200 ENVIRONMENT "COLL_SOCKET_IFNAME=lo")
add_test(NAME cases.${name}.off COMMAND case_${name} off)
set_tests_properties(cases.${name}.off PROPERTIES TIMEOUT 200 LABELS cases
                     ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_SHM_CMA_THRESHOLD=0")
