include(${CMAKE_CURRENT_SOURCE_DIR}/helper_fail.cmake)
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 120)
