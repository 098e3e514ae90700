include(${CMAKE_CURRENT_SOURCE_DIR}/helper_fail.cmake)
# 50 + 50 trials take ~2.5 min on 2 cores (gcc); the sanitizer build, where
# starting 4 ranks alone takes seconds, leaves the soak to the gcc run (the
# failure paths run under the sanitizers in the other i13_* and br* cases).
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 400)
if(COLL_SANITIZE)
  set_tests_properties(cases.${name} PROPERTIES DISABLED TRUE)
endif()
