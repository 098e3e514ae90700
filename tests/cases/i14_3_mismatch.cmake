# Issue 14.3 over TCP too (shared memory with the mailbox is the default; the
# counts beyond the mailbox run the schedules there). Not with the mailbox
# off: without its failure flags, a rank of one node that waits for a
# connection from a live peer that failed and never connects learns it only
# from its timeout (the receivers still fail at once, naming both calls).
include(${CMAKE_CURRENT_SOURCE_DIR}/helper_data.cmake)
coll_data_variant(tcp "COLL_SHM_DISABLE=1")
