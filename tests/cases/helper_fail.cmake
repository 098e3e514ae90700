# helper_fail.cmake - links the failure-case helpers (helper_fail.c) and the
# torchrun-style launcher (helper_launch.c) into the case being configured;
# COLL_BENCH_DIR is where the benchmarks were built. Include from <name>.cmake:
#   include(${CMAKE_CURRENT_SOURCE_DIR}/helper_fail.cmake)
include(${CMAKE_CURRENT_SOURCE_DIR}/helper_launch.cmake)
if(NOT TARGET coll_case_fail)
  add_library(coll_case_fail STATIC ${CMAKE_CURRENT_SOURCE_DIR}/helper_fail.c)
  target_link_libraries(coll_case_fail PUBLIC coll_case_launch)
endif()
target_link_libraries(case_${name} PRIVATE coll_case_fail)
target_compile_definitions(case_${name} PRIVATE COLL_BENCH_DIR="${CMAKE_BINARY_DIR}/benchmarks")
