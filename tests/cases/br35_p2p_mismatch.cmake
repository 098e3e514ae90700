# BR-35 over TCP too (shared memory is the default).
include(${CMAKE_CURRENT_SOURCE_DIR}/helper_data.cmake)
coll_data_variant(tcp "COLL_SHM_DISABLE=1")
