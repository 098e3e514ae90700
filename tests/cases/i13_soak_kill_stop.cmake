include(${CMAKE_CURRENT_SOURCE_DIR}/helper_fail.cmake)
# 50 + 50 trials take ~3 min on 2 cores; the sanitizer build runs 10 + 10
if(COLL_SANITIZE)
  set_tests_properties(cases.${name} PROPERTIES TIMEOUT 400 ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_SOAK_TRIALS=10")
else()
  set_tests_properties(cases.${name} PROPERTIES TIMEOUT 400)
endif()
