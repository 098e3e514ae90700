#!/bin/bash
# guest_suite.sh BUILD_DIR [full] - the ib transport on real verbs (Soft-RoCE),
# run by tests/rdma/run_suite.sh inside a vm.sh guest. One rxe device on a
# dummy netdev; every rank of a job uses it (two rxe devices in one guest do
# not talk to each other, tests/rdma/README.md). Prints PASS/FAIL per step;
# the exit status is the number of failed steps.
B=${1:-build}
. tests/rdma/guest_lib.sh
rxe_up dummy0 198.18.0.1 || { echo "FAIL rxe setup"; exit 100; }
ibv_devinfo -d rxe0 | grep -E 'hca_id|state|active_mtu'
export COLL_SOCKET_IFNAME=lo COLL_TIMEOUT=60
IB="COLL_NET=ib COLL_SHM_DISABLE=1 COLL_MAILBOX_BYTES=0"

# expect_fail NAME PATTERN CMD...: CMD must fail and print PATTERN
expect_fail() {
  local pat=$1; shift
  local out; out=$("$@" 2>&1); local rc=$?
  if [ $rc = 0 ]; then echo "$out" | tail -5; echo "expected a failure"; return 1; fi
  echo "$out" | grep -q -- "$pat" || { echo "$out" | tail -5; echo "missing: $pat"; return 1; }
  echo "$out" | grep -m1 -- "$pat"
}
# expect_log PATTERN CMD...: CMD must pass and print PATTERN
expect_log() {
  local pat=$1; shift
  local out; out=$("$@" 2>&1); local rc=$?
  [ $rc = 0 ] || { echo "$out" | tail -8; return 1; }
  echo "$out" | grep -q -- "$pat" || { echo "$out" | tail -5; echo "missing: $pat"; return 1; }
  echo "$out" | grep -m1 -- "$pat"
}

# the transport's own tests (conformance suite and more) on rxe0
step conformance env COLL_TEST_IB_REAL=1 timeout 300 "$B/tests/test_ib"

# every collective, type, op, count and root on 3 and 4 ranks over ib (the two-guest test runs 4 ranks, 2 per guest)
for n in 3 4; do
  step "collectives.np$n" env $IB COLL_TEST_QUICK=1 timeout 600 "$B/tests/integration/test_collectives" $n
done
# several QPs per connection, four channels and small chunks (many messages)
step collectives.np3.qps3 env $IB COLL_IB_QPS_PER_CONNECTION=3 COLL_NCHANNELS=4 COLL_CHUNKSIZE=4096 \
  COLL_TEST_QUICK=1 timeout 600 "$B/tests/integration/test_collectives" 3

# a killed rank: the survivors fail within seconds, naming the lost peer.
# The ranks are started as torchrun starts them (RANK/WORLD_SIZE/MASTER_*):
# the -np launcher would SIGTERM the survivors as soon as one rank dies,
# before they could notice the lost connection themselves.
killed() {
  local log=/tmp/killed
  local pids=() r
  for r in 0 1 2; do
    env $IB RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \
      COLL_TIMEOUT=120 timeout -k 5 120 "$B/benchmarks/allreduce_perf" -b 64K -e 64K -n 1000000 -w 1 -c 0 \
      >$log.$r 2>&1 &
    pids+=($!)
  done
  sleep 8 # init and the first calls
  local victim; victim=$(pgrep -P "${pids[2]}" | tail -1)
  [ -n "$victim" ] || { cat $log.*; echo "no rank 2 process to kill"; return 1; }
  local t0; t0=$(date +%s.%N)
  kill -9 "$victim"
  local rc=0
  timeout 60 tail --pid="${pids[0]}" --pid="${pids[1]}" -f /dev/null || rc=1
  local dt; dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}')
  wait "${pids[@]}"
  echo "killed rank 2 (pid $victim): ranks 0 and 1 ended after $dt s"
  grep -h -m1 "connection with .* lost\|rank .* failed" $log.0 $log.1
  [ $rc = 0 ] && grep -q "ib: connection with .* lost" $log.0 && grep -q "ib: connection with .* lost" $log.1 &&
    awk -v d="$dt" 'BEGIN{exit !(d < 15)}'
}
step killed.np3 killed
[ "${2:-}" = full ] && step faults.killed env $IB timeout 600 "$B/tests/integration/test_faults" killed

# device and address choice
step hca.exact expect_log "ib: \[0\] rxe0:1/RoCE" env $IB COLL_IB_HCA==rxe0:1 COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=NET \
  timeout 120 "$B/benchmarks/sendrecv_perf" -np 2 -b 8 -e 8 -n 2 -w 1 -c 1
step hca.excluded expect_fail "no usable port" env $IB COLL_IB_HCA=^rxe0 \
  timeout 120 "$B/benchmarks/sendrecv_perf" -np 2 -b 8 -e 8 -n 2 -w 1 -c 1
step gid.auto expect_log "GID index 1 ::ffff:198.18.0.1 (RoCE v2; first RoCE v2 GID with an IPv4 address)" \
  env $IB COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=NET timeout 120 "$B/benchmarks/allreduce_perf" -np 2 -b 8 -e 64K -f 32 -n 2 -w 1 -c 1
step gid.forced0 expect_log "GID index 0 fe80:" env $IB COLL_IB_GID_INDEX=0 COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=NET \
  timeout 120 "$B/benchmarks/allreduce_perf" -np 2 -b 8 -e 64K -f 32 -n 2 -w 1 -c 1
step gid.beyond expect_fail "COLL_IB_GID_INDEX=200 is beyond the GID table" env $IB COLL_IB_GID_INDEX=200 \
  timeout 120 "$B/benchmarks/sendrecv_perf" -np 2 -b 8 -e 8 -n 2 -w 1 -c 1
# registration owned by the engine: root reads page frames, so reused buffers
# hit the cache (each hit checked); test_collectives above maps fresh buffers
# for every case (the remap hazard) and passed with it
step reg.cache expect_log "registrations (cached, checked against page frames): [1-9][0-9]* hits" \
  env $IB COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=NET timeout 120 "$B/benchmarks/sendrecv_perf" -np 2 -b 1M -e 1M -n 5 -w 1 -c 1
# side by side (one run, same link): per-message registration vs the cache
for m in 0 -1; do
  echo "sendrecv_perf COLL_REG_CACHE=$m:"
  env $IB COLL_REG_CACHE=$m timeout 200 "$B/benchmarks/sendrecv_perf" -np 2 -b 64K -e 4M -f 4 -n 10 -w 2 -c 0 2>&1 |
    grep -E '^ +[0-9]+' | awk '{print "  " $0}'
done
echo "SUITE_DONE failures=$FAILS"
exit $FAILS
