# Issue 14.2 with every reducing algorithm forced (the float32 partial results
# must survive every schedule's wire; the mailbox off, so that the small
# counts run the schedules too). gcc build only: the arithmetic is the same
# under the sanitizers, which the default run covers.
if(NOT COLL_SANITIZE)
  include(${CMAKE_CURRENT_SOURCE_DIR}/helper_data.cmake)
  coll_data_variant(tree "COLL_MAILBOX_BYTES=0" "COLL_ALGO=allreduce:tree\\;reduce:binomial")
  coll_data_variant(rhd "COLL_MAILBOX_BYTES=0" "COLL_ALGO=allreduce:rhd\\;reducescatter:rhd")
  coll_data_variant(direct "COLL_MAILBOX_BYTES=0" "COLL_ALGO=allreduce:direct\\;reducescatter:direct")
endif()
