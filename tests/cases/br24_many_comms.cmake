# 5000 communicators on 2 ranks take about 20 s in the gcc build; under the
# sanitizers 1000 show the same (no port or fd leak, errors on every rank).
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 300)
if(COLL_SANITIZE)
  set_tests_properties(cases.${name} PROPERTIES ENVIRONMENT "COLL_SOCKET_IFNAME=lo;BR24_COUNT=1000")
endif()
