# forks a fresh process per settings scenario (tests/cases/helper_envchild.c)
target_sources(case_${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/helper_envchild.c)
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 60)
