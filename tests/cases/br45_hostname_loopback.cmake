include(${CMAKE_CURRENT_LIST_DIR}/helper_iface.cmake)
set_tests_properties(cases.br45_hostname_loopback PROPERTIES TIMEOUT 180 ENVIRONMENT "${_env}")
