# Python cannot load a sanitized libcoll.so: the script skips (77) there.
set_tests_properties(cases.br17_torch_reinit PROPERTIES LABELS "cases;torch" TIMEOUT 600)
