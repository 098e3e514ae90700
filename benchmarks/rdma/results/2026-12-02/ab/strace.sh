#!/bin/bash
. tests/rdma/guest_lib.sh
rxe_up dummy0 198.18.0.1 || exit 3
export COLL_SOCKET_IFNAME=lo
IB="COLL_NET=ib COLL_SHM_DISABLE=1 COLL_MAILBOX_BYTES=0"
for n in 10 210; do
env $IB strace -f -c -o $VMOUT/st$n.txt timeout 300 build/benchmarks/allreduce_perf -np 2 -b 64 -e 64 -n $n -w 0 -c 0 2>&1 | grep -E '^ +[0-9]'
done
echo ST_DONE
