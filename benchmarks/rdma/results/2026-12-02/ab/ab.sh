#!/bin/bash
. tests/rdma/guest_lib.sh
rxe_up dummy0 198.18.0.1 || exit 3
export COLL_SOCKET_IFNAME=lo
IB="COLL_NET=ib COLL_SHM_DISABLE=1 COLL_MAILBOX_BYTES=0"
P=22400
bw() { local p=$((P++)); ib_write_bw $1 -p $p -F -d rxe0 -x 1 -s $2 -n 20 --report_gbits >/dev/null 2>&1 & sleep 1
  ib_write_bw $1 -p $p -F -d rxe0 -x 1 -s $2 -n 20 --report_gbits 127.0.0.1 2>&1 | grep -A1 '#bytes' | tail -1; wait; }
ar() { local n=$1 b=$2; shift 2; echo "== ar $n"; env $IB "$@" timeout 300 $b/benchmarks/allreduce_perf -np 2 -b 8 -e 32K -f 8 -n 20 -w 3 -c 0 2>&1 | grep -E '^ +[0-9]'; }
sr() { local n=$1; shift; echo "== sr $n"; env $IB "$@" timeout 300 build/benchmarks/sendrecv_perf -np 2 -b 1M -e 4M -f 4 -n 5 -w 1 -c 0 2>&1 | grep -E '^ +[0-9]'; }
for r in 1 2 3; do
  echo "#### round $r"
  ar new build
  ar old build/ab/bld
  ar new0 build COLL_SPIN_US=0
  ar old0 build/ab/bld COLL_SPIN_US=0
  for s in 1048576 4194304; do echo "bidi $(bw -b $s)"; done
  sr new
  sr oldchunk COLL_CHUNKSIZE=524288
done
echo AB_DONE
