# BR-05 with each reduce algorithm forced (gcc build only; the sanitizer
# run keeps the default variant).
if(COLL_SANITIZE)
  return()
endif()
foreach(_algo chain binomial)
  add_test(NAME cases.${name}.${_algo} COMMAND case_${name})
  set_tests_properties(cases.${name}.${_algo} PROPERTIES TIMEOUT 300 LABELS cases
                       ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_ALGO=reduce:${_algo}")
endforeach()
