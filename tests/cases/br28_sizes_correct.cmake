# gcc build only: the sizes and transports are covered under the sanitizers by
# the multi-process tests; this one forks 4 benchmark jobs and a smoke run.
if(COLL_SANITIZE)
  set_tests_properties(cases.${name} PROPERTIES DISABLED TRUE)
endif()
