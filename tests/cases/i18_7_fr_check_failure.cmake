target_link_libraries(case_${name} PRIVATE Threads::Threads)
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 60 LABELS "cases;obs")
