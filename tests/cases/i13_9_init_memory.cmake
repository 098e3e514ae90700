# Under the sanitizers every process starts near 570 MB of VmHWM (shadow,
# allocator): 8 ranks without a per-rank bound, and a cost-model bound that
# still catches the old O(n^2) (1.2 GB at 2048 ranks).
if(COLL_SANITIZE)
  set_tests_properties(cases.${name} PROPERTIES ENVIRONMENT
    "COLL_SOCKET_IFNAME=lo;I13_9_RANKS=8;I13_9_LIMIT_MB=256;I13_9_RANK_LIMIT_MB=0")
endif()
