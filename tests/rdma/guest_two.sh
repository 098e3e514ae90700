#!/bin/bash
# guest_two.sh BUILD_DIR - two nodes joined by a virtual wire (vm.sh -2): each
# guest is a node with its own rxe device on eth0 (198.18.0.1 and .2) and
# two ranks; ranks talk over ib between the nodes and shared memory inside
# them. Run by tests/rdma/run_two.sh. Exit status: failed steps.
B=${1:-build}
. tests/rdma/guest_lib.sh
N=$VM_NODE
hostname "node$N"
rxe_up eth0 "198.18.0.$((N + 1))" || { echo "FAIL rxe setup"; exit 100; }
PEER=198.18.0.$((2 - N))
for _ in $(seq 150); do busybox ping -c1 -W1 "$PEER" >/dev/null 2>&1 && break; sleep 0.2; done
busybox ping -c1 -W2 "$PEER" >/dev/null 2>&1 || { echo "FAIL: no wire to $PEER"; exit 101; }
export COLL_SOCKET_IFNAME=eth0 COLL_NET=ib MASTER_ADDR=198.18.0.1 WORLD_SIZE=4 COLL_TIMEOUT=120

PORT=17100
# ranks N*2 and N*2+1 of one job (the other guest runs the other two)
job() {
  PORT=$((PORT + 10))
  local pids="" rc=0
  for l in 0 1; do
    env RANK=$((2 * N + l)) LOCAL_RANK=$l LOCAL_WORLD_SIZE=2 MASTER_PORT=$PORT "$@" > "/tmp/rank$l.log" 2>&1 &
    pids="$pids $!"
  done
  for p in $pids; do wait "$p" || rc=1; done
  tail -n 2 /tmp/rank0.log /tmp/rank1.log | grep -v "^$"
  return $rc
}
check_log() { # PATTERN: in rank 0's log of the last job
  grep -m1 -- "$1" /tmp/rank0.log || { echo "missing: $1"; return 1; }
}

step two.collectives job env COLL_TEST_QUICK=1 timeout 600 "$B/tests/integration/test_collectives"
step two.hier job env COLL_TEST_QUICK=1 COLL_ALGO="allreduce:hier;allgather:hier;reducescatter:hier" \
  timeout 600 "$B/tests/integration/test_collectives"
step two.hier_leader job env COLL_TEST_QUICK=1 COLL_ALGO="allreduce:hier_chain_ring" \
  timeout 600 "$B/tests/integration/test_collectives"
step two.route job env COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=NET timeout 120 "$B/benchmarks/allreduce_perf" -b 1M -e 1M -n 2 -w 1 -c 1
step two.route.gid check_log "GID index 1 ::ffff:198.18.0.$((N + 1))"
# COLL_NET unset: each pair takes the first transport of the list that fits
# (shm inside the node, ib between the nodes), named per pair at INFO
step two.default_list job env -u COLL_NET COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=INIT timeout 120 \
  "$B/benchmarks/allreduce_perf" -b 1M -e 1M -n 2 -w 1 -c 1
step two.default_list.pairs check_log "transports: shm to ranks $((2 * N))-$((2 * N + 1)); ib (rxe0) to ranks"
echo "SUITE_DONE failures=$FAILS"
exit $FAILS
