set_tests_properties(cases.br22_shm_size PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
