include(${CMAKE_CURRENT_SOURCE_DIR}/helper_data.cmake)
coll_data_variant(tcp "COLL_SHM_DISABLE=1")
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 180)
