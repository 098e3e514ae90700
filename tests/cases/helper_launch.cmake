# helper_launch.cmake - links the torchrun-style launcher (helper_launch.c)
# into the case test being configured. Include it from <name>.cmake:
#   include(${CMAKE_CURRENT_SOURCE_DIR}/helper_launch.cmake)
if(NOT TARGET coll_case_launch)
  add_library(coll_case_launch STATIC ${CMAKE_CURRENT_SOURCE_DIR}/helper_launch.c)
  target_link_libraries(coll_case_launch PUBLIC coll_mp_harness)
  target_include_directories(coll_case_launch PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
endif()
target_link_libraries(case_${name} PRIVATE coll_case_launch)
