# helper_iface.cmake - the rank program of the interface cases (br25, br26,
# br45): included by their <name>.cmake, defined once.
if(NOT TARGET case_iface_rank)
  add_executable(case_iface_rank ${CMAKE_CURRENT_LIST_DIR}/helper_iface_rank.c)
  target_link_libraries(case_iface_rank PRIVATE coll)
endif()
