# helper_data.cmake - variants of the data-path cases (included by their
# <name>.cmake): coll_data_variant(<suffix> [ENV...]) runs case_<name> once
# more as cases.<name>.<suffix> with COLL_SOCKET_IFNAME=lo and the given
# environment (a ';' inside one value is written "\\;").
function(coll_data_variant suffix)
  add_test(NAME cases.${name}.${suffix} COMMAND case_${name})
  set_tests_properties(cases.${name}.${suffix} PROPERTIES TIMEOUT 300 LABELS cases
                       ENVIRONMENT "COLL_SOCKET_IFNAME=lo;${ARGN}")
endfunction()
