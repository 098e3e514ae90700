# BR-08 needs 13 GB (int64, 4 ranks) or 6.5 GB (uint8, 2 ranks): its own
# label, gcc build only (under ASan the shadow memory alone would not fit),
# skipped (77) when MemAvailable is short. The glob's test runs int64.
set_tests_properties(cases.${name} PROPERTIES LABELS cases-big TIMEOUT 1800 SKIP_RETURN_CODE 77
                     ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_TIMEOUT=600" RUN_SERIAL TRUE)
add_test(NAME cases.${name}.uint8 COMMAND case_${name} uint8)
set_tests_properties(cases.${name}.uint8 PROPERTIES LABELS cases-big TIMEOUT 1800 SKIP_RETURN_CODE 77
                     ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_TIMEOUT=600" RUN_SERIAL TRUE)
if(COLL_SANITIZE)
  set_tests_properties(cases.${name} cases.${name}.uint8 PROPERTIES DISABLED TRUE)
endif()
