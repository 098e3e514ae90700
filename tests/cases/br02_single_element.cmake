# BR-02 again with the mailbox off, so that the schedules run, with the
# tuner's choice and with each algorithm forced (counts below the rank count
# reach every builder). gcc build only: under ASan each job's init alone
# takes seconds, and the sanitizer run keeps the default variant above.
if(COLL_SANITIZE)
  return()
endif()
foreach(_algo "default"
              "allreduce:ring\;allgather:ring\;reducescatter:ring\;broadcast:chain\;reduce:chain"
              "allreduce:tree\;broadcast:binomial\;reduce:binomial"
              "allreduce:rhd\;reducescatter:rhd\;allgather:bruck"
              "allreduce:direct\;reducescatter:direct\;allgather:direct")
  if(_algo STREQUAL "default")
    set(_tag nomailbox)
    set(_env "")
  else()
    string(REGEX MATCH "^[a-z]+:([a-z]+)" _m "${_algo}")
    set(_tag nomailbox_${CMAKE_MATCH_1})
    set(_env ";COLL_ALGO=${_algo}")
  endif()
  add_test(NAME cases.${name}.${_tag} COMMAND case_${name} 3 4 8)
  set_tests_properties(cases.${name}.${_tag} PROPERTIES TIMEOUT 300 LABELS cases
                       ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_MAILBOX_BYTES=0${_env}")
endforeach()
