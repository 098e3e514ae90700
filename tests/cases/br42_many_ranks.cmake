# 64 ranks (about 20 s in the gcc build on 2 loaded cores); the pinned
# variant (8 ranks on 2 cores, 1000 small all-reduces) as its own test.
# 128 and 256 ranks run by hand: case_br42_many_ranks 256 300.
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 200)
if(COLL_SANITIZE) # 2-3x slower and about 0.5 GB per process: 8 ranks
  set_tests_properties(cases.${name} PROPERTIES ENVIRONMENT "COLL_SOCKET_IFNAME=lo;BR42_RANKS=8")
endif()
add_test(NAME cases.${name}.pinned COMMAND case_${name} pinned)
set_tests_properties(cases.${name}.pinned PROPERTIES TIMEOUT 120 LABELS cases ENVIRONMENT "COLL_SOCKET_IFNAME=lo")
