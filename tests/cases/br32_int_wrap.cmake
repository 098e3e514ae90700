# BR-32 with the mailbox off and over TCP too.
include(${CMAKE_CURRENT_SOURCE_DIR}/helper_data.cmake)
coll_data_paths()
