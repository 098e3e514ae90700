set_tests_properties(cases.i19_readme_params PROPERTIES TIMEOUT 30 LABELS "cases;docs")
