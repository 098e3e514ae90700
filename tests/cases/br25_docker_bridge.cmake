include(${CMAKE_CURRENT_LIST_DIR}/helper_iface.cmake)
set_tests_properties(cases.br25_docker_bridge PROPERTIES TIMEOUT 180 ENVIRONMENT "${_env}")
