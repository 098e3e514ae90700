target_compile_definitions(case_${name} PRIVATE COLL_PROFILER_EXAMPLE="$<TARGET_FILE:coll_profiler_example>")
add_dependencies(case_${name} coll_profiler_example)
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 120 LABELS "cases;obs")
