# i17_4_zerocopy: `reuse` (cases.i17_4_zerocopy.reuse): buffers used again,
# swapped, at offsets, new and reallocated, after a fallback; `exact` with every all-reduce and reduce-scatter forced
# through zerocopy; `bits` (cases.i17_4_zerocopy.bits) lets the tuner pick it
# from 1 MiB and compares with direct on malloc'd buffers, on one channel
# (with several, channel c runs direct over ranks renumbered per channel:
# another order of the sums, other bits).
set_tests_properties(cases.${name} PROPERTIES TIMEOUT 200
                     ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_ALGO=zerocopy")
add_test(NAME cases.${name}.bits COMMAND case_${name} bits)
set_tests_properties(cases.${name}.bits PROPERTIES TIMEOUT 200 LABELS cases
                     ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_ALGO=direct,zerocopy;COLL_NCHANNELS=1")
add_test(NAME cases.${name}.reuse COMMAND case_${name} reuse)
set_tests_properties(cases.${name}.reuse PROPERTIES TIMEOUT 200 LABELS cases
                     ENVIRONMENT "COLL_SOCKET_IFNAME=lo;COLL_ALGO=direct,zerocopy")
