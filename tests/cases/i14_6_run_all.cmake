# Tests shell scripts against fake cmake/ctest: nothing to sanitize, so the
# ASan build does not run it a second time (~13 s).
if(COLL_SANITIZE)
  set_tests_properties(cases.${name} PROPERTIES DISABLED TRUE)
endif()
