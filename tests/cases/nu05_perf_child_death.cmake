set_tests_properties(cases.${name} PROPERTIES TIMEOUT 120)
