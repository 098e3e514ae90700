set_tests_properties(cases.${name} PROPERTIES TIMEOUT 180 LABELS "cases;obs")
