#!/bin/bash
# sendrecv 1 and 4 MiB over ib: the phase-1 base (4741c08, per-message registration inside the transport),
# this branch with COLL_REG_CACHE=0 (per message, engine-owned) and with the default (cache, frames checked),
# beside ib_write_bw; alternating, 3 rounds, one guest.
. tests/rdma/guest_lib.sh
rxe_up dummy0 198.18.0.1 || exit 3
export COLL_SOCKET_IFNAME=lo COLL_NET=ib COLL_SHM_DISABLE=1 COLL_MAILBOX_BYTES=0
P=18500
for r in 1 2 3; do
  P=$((P + 1))
  ib_write_bw -F -d rxe0 -x 1 -s 4194304 -n 20 --report_gbits -p $P >/dev/null 2>&1 &
  sleep 1
  echo "round $r ib_write_bw 4MiB: $(ib_write_bw -F -d rxe0 -x 1 -s 4194304 -n 20 --report_gbits -p $P 127.0.0.1 2>&1 | grep -A1 '#bytes' | tail -1)"
  wait
  echo "round $r base"
  LD_LIBRARY_PATH=/var/tmp/ib2base timeout 200 /var/tmp/ib2base/sendrecv_perf -np 2 -b 1M -e 4M -f 4 -n 20 -w 2 -c 0 2>&1 | grep -E '^ +[0-9]+'
  for m in 0 -1; do
    echo "round $r COLL_REG_CACHE=$m"
    COLL_REG_CACHE=$m timeout 200 build/benchmarks/sendrecv_perf -np 2 -b 1M -e 4M -f 4 -n 20 -w 2 -c 0 2>&1 | grep -E '^ +[0-9]+'
  done
done
