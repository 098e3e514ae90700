include(${CMAKE_CURRENT_LIST_DIR}/helper_iface.cmake)
set_tests_properties(cases.br26_address_family PROPERTIES TIMEOUT 240 ENVIRONMENT "${_env}")
