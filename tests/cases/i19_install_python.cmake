set_tests_properties(cases.i19_install_python PROPERTIES TIMEOUT 180 LABELS "cases;install")
