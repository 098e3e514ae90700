target_compile_definitions(case_${name} PRIVATE COLL_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 120 LABELS "cases;obs")
