# The device tests against the fake driver (tests/fakecuda): included by
# tests/CMakeLists.txt once test_exec, test_p2p and gpu_kernels exist.
# Label fakecuda; each sets COLL_CUDA_LIBRARY to libcollfakecuda.so.
set(_fk "COLL_CUDA_LIBRARY=$<TARGET_FILE:collfakecuda>")
function(coll_fakecuda_test name)
  cmake_parse_arguments(F "" "TIMEOUT" "COMMAND;ENV" ${ARGN})
  add_test(NAME fakecuda.${name} COMMAND ${F_COMMAND})
  set_tests_properties(fakecuda.${name} PROPERTIES TIMEOUT ${F_TIMEOUT} LABELS "fakecuda;unit"
                       ENVIRONMENT "${_fk};${F_ENV}")
endfunction()
foreach(t test_exec test_p2p test_cuda_loader gpu_kernels)
  add_dependencies(${t} collfakecuda)
endforeach()
coll_fakecuda_test(exec COMMAND test_exec TIMEOUT 120)
coll_fakecuda_test(exec_delay COMMAND test_exec TIMEOUT 120 ENV FAKECUDA_DELAY_US=200)
coll_fakecuda_test(p2p COMMAND test_p2p TIMEOUT 180)
coll_fakecuda_test(p2p_delay COMMAND test_p2p TIMEOUT 180 ENV FAKECUDA_DELAY_US=100)
coll_fakecuda_test(kernels COMMAND gpu_kernels --quick --no-bandwidth TIMEOUT 300)
if(NOT COLL_SANITIZE)
  # the gate's host-function fallback (the kernels again: 16 s; gcc only)
  coll_fakecuda_test(kernels_no_memops COMMAND gpu_kernels --quick --no-bandwidth TIMEOUT 300 ENV FAKECUDA_NO_MEMOPS=1)
endif()
# test_cuda_loader's fake-driver cases load it by path
target_compile_definitions(test_cuda_loader PRIVATE COLL_FAKECUDA="$<TARGET_FILE:collfakecuda>")
# two GPUs: p2p between them, and refused where they cannot reach each other
coll_fakecuda_test(p2p_two_gpus COMMAND test_p2p TIMEOUT 180 ENV FAKECUDA_DEVICES=2)
coll_fakecuda_test(p2p_no_peer COMMAND test_p2p TIMEOUT 180 ENV "FAKECUDA_DEVICES=2;FAKECUDA_NO_PEER=1")
# the fake's own behaviour (what the tests above rely on)
add_executable(test_fakecuda ${CMAKE_CURRENT_LIST_DIR}/test_fakecuda.c)
target_link_libraries(test_fakecuda PRIVATE coll_internal PkgConfig::CMOCKA)
target_compile_definitions(test_fakecuda PRIVATE COLL_FAKECUDA="$<TARGET_FILE:collfakecuda>")
add_dependencies(test_fakecuda collfakecuda)
add_test(NAME fakecuda.self COMMAND test_fakecuda)
set_tests_properties(fakecuda.self PROPERTIES TIMEOUT 120 LABELS "fakecuda;unit")
