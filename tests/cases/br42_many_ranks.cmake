# CI: 32 ranks (64 take 40-60 s on 2 loaded cores, mostly the 4 MiB
# all-reduces); under the sanitizers 8 (each process takes about 0.5 GB).
# 64, 128 and 256 ranks by hand: case_br42_many_ranks 256 300.
# The pinned variant (8 ranks on 2 cores, 1000 small all-reduces) is its own test.
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 200 ENVIRONMENT "COLL_SOCKET_IFNAME=lo;BR42_RANKS=32")
if(COLL_SANITIZE)
  set_tests_properties(cases.${name} PROPERTIES ENVIRONMENT "COLL_SOCKET_IFNAME=lo;BR42_RANKS=8")
endif()
add_test(NAME cases.${name}.pinned COMMAND case_${name} pinned)
set_tests_properties(cases.${name}.pinned PROPERTIES TIMEOUT 120 LABELS cases ENVIRONMENT "COLL_SOCKET_IFNAME=lo")
