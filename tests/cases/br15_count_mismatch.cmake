# BR-15 over TCP too (shared memory with the mailbox is the default; A and B
# run the schedules there). Over TCP a survivor may try to connect to a rank
# that already failed; tcp's connect retries the refused listener for
# COLL_CONNECT_TIMEOUT_MS (60 s) inside one call, so the variant shortens it
# to 2 s (a bounded connect that checks for gone peers is developer fail's
# change, wt-fail 312c1de). Not with the mailbox off: see i14_3_mismatch.cmake.
include(${CMAKE_CURRENT_SOURCE_DIR}/helper_data.cmake)
coll_data_variant(tcp "COLL_SHM_DISABLE=1" "COLL_CONNECT_TIMEOUT_MS=2000")
