# Python cannot load a sanitized libcoll.so: the script skips (77) there.
set_tests_properties(cases.i14p1_torch_churn PROPERTIES LABELS "cases;torch" TIMEOUT 600)
# The issue's 2000 cycles (about 45 s on torch 1.13, 65-70 s on torch 2.14, 2 loaded cores).
add_test(NAME cases.i14p1_torch_churn_2000 COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/i14p1_torch_churn.sh
         ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(cases.i14p1_torch_churn_2000 PROPERTIES LABELS "cases;torch;soak" TIMEOUT 900
                     SKIP_RETURN_CODE 77 ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_TORCH_CHURN_CYCLES=2000")
