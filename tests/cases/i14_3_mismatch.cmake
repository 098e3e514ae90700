# Issue 14.3 in each data path: shared memory with the mailbox (default), shared
# memory with the mailbox off (every call runs its schedule), and TCP.
include(${CMAKE_CURRENT_SOURCE_DIR}/helper_data.cmake)
coll_data_paths()
