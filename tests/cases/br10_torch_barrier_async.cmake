# Python cannot load a sanitized libcoll.so: the script skips (77) there.
set_tests_properties(cases.br10_torch_barrier_async PROPERTIES LABELS "cases;torch" TIMEOUT 600)
