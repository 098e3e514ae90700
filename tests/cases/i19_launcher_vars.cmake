include(${CMAKE_CURRENT_SOURCE_DIR}/helper_launch.cmake)
target_compile_definitions(case_${name} PRIVATE COLL_BENCH_DIR="${CMAKE_BINARY_DIR}/benchmarks")
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 120)
