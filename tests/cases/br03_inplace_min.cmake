# BR-03 with the mailbox off and each all-reduce algorithm forced (gcc build
# only; the sanitizer run keeps the default variant).
if(COLL_SANITIZE)
  return()
endif()
foreach(_algo default ring tree rhd direct)
  if(_algo STREQUAL "default")
    set(_env "")
  else()
    set(_env ";COLL_ALGO=allreduce:${_algo}")
  endif()
  add_test(NAME cases.${name}.nomailbox_${_algo} COMMAND case_${name})
  set_tests_properties(cases.${name}.nomailbox_${_algo} PROPERTIES TIMEOUT 300 LABELS cases
                       ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_MAILBOX_BYTES=0${_env}")
endforeach()
