include(${CMAKE_CURRENT_SOURCE_DIR}/helper_launch.cmake)
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 60)
