# BR-13 with the mailbox off too (the 1-element all-reduces of the extra
# communicators then run schedules). Not with COLL_TUNE_CALIBRATE=1: measured
# link speeds can change the tuner's choice between jobs (seen on this VM under
# load: a 128 KiB all-reduce on 4 ranks chose rhd in two jobs and ring in a
# third), and with it the order of float sums.
# The variant runs in the gcc build only (35 s under the sanitizers), and there
# the case runs one set of processes, not two (38 s -> ~19 s; the arithmetic
# is the same, run-to-run identity is the gcc build's to show).
if(COLL_SANITIZE)
  target_compile_definitions(case_br13_determinism PRIVATE BR13_RUNS=1)
endif()
if(NOT COLL_SANITIZE)
  include(${CMAKE_CURRENT_SOURCE_DIR}/helper_data.cmake)
  coll_data_variant(nomailbox "COLL_MAILBOX_BYTES=0")
endif()
