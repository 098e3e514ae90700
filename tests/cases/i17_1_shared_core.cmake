# about 1 s (before the fix: 2-4 s, failing); the ranks and a CPU-bound
# helper are pinned to one CPU, the helper is killed at the end
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 120)
