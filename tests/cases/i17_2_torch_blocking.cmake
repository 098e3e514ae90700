# Python cannot load a sanitized libcoll.so: the script skips (77) there.
set_tests_properties(cases.i17_2_torch_blocking PROPERTIES LABELS "cases;torch" TIMEOUT 300 SKIP_RETURN_CODE 77)
