#!/bin/bash
# ab2.sh - two guests: coll all-reduce 128 KiB..8 MiB, old (main) and new build interleaved
. tests/rdma/guest_lib.sh
N=${VM_NODE:-0}
hostname "node$N"
rxe_up eth0 "198.18.0.$((N + 1))" || exit 3
for _ in $(seq 150); do busybox ping -c1 -W1 "198.18.0.$((2 - N))" >/dev/null 2>&1 && break; sleep 0.2; done
export COLL_SOCKET_IFNAME=eth0
IB="COLL_NET=ib COLL_SHM_DISABLE=1 COLL_MAILBOX_BYTES=0"
PORTK=0
ar() { local name=$1 b=$2; shift 2; echo "== $name"
  env $IB "$@" RANK=$N WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=198.18.0.1 MASTER_PORT=$((17300 + PORTK++ * 2)) \
    timeout 200 $b/benchmarks/allreduce_perf -b 128K -e 8M -f 4 -n 3 -w 1 -c 1 -y 1 2>&1 | grep -E '^ +[0-9]'
  echo "cpu $(cat /proc/loadavg)"; }
for r in 1 2 3; do
  echo "#### round $r"
  ar new build
  ar old build/ab/bld
done
echo AB_DONE
