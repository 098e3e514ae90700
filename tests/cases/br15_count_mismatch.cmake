# BR-15 with the mailbox off and over TCP too. Over TCP a survivor may try to
# connect to a rank that already failed and left; tcp's connect retries the
# refused listener for COLL_CONNECT_TIMEOUT_MS (60 s) inside one call, so the
# variant shortens it to 2 s (a bounded connect that checks for gone peers is
# developer fail's change, wt-fail 312c1de).
include(${CMAKE_CURRENT_SOURCE_DIR}/helper_data.cmake)
coll_data_variant(nomailbox "COLL_MAILBOX_BYTES=0")
coll_data_variant(tcp "COLL_SHM_DISABLE=1" "COLL_CONNECT_TIMEOUT_MS=2000")
