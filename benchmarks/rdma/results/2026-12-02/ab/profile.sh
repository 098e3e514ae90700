#!/bin/bash
. tests/rdma/guest_lib.sh
rxe_up dummy0 198.18.0.1 || exit 3
export COLL_SOCKET_IFNAME=lo
B=build O=$VMOUT
IB="COLL_NET=ib COLL_SHM_DISABLE=1 COLL_MAILBOX_BYTES=0"
P=22100
bw() { local p=$((P++)); ib_write_bw $1 -p $p -F -d rxe0 -x 1 -s $2 -n 20 --report_gbits >/dev/null 2>&1 & sleep 1
  ib_write_bw $1 -p $p -F -d rxe0 -x 1 -s $2 -n 20 --report_gbits 127.0.0.1 2>&1 | grep -A1 '#bytes' | tail -1; wait; }
sr() { local name=$1; shift; echo "== sr $name"; /usr/bin/time -f "wall %e user %U sys %S" env $IB "$@" timeout 300 $B/benchmarks/sendrecv_perf -np 2 -b 1M -e 4M -f 4 -n 5 -w 1 -c 0 2>&1 | grep -E '^ +[0-9]|wall'; }
for s in 1048576 4194304; do echo "bidi $(bw -b $s)"; done
sr default
sr nch1 COLL_NCHANNELS=1
sr nch4 COLL_NCHANNELS=4
sr chunk2M COLL_CHUNKSIZE=2097152
sr chunk4M1 COLL_CHUNKSIZE=4194304 COLL_NCHANNELS=1
sr chunk128K COLL_CHUNKSIZE=131072 COLL_NCHANNELS=4
sr qps2 COLL_IB_QPS_PER_CONNECTION=2
sr spin0 COLL_SPIN_US=0
sr spinbig COLL_SPIN_US=100000
for s in 1048576 4194304; do echo "bidi $(bw -b $s)"; done
echo "== strace default"
env $IB strace -f -c -o $O/strace.txt timeout 300 $B/benchmarks/sendrecv_perf -np 2 -b 4M -e 4M -n 10 -w 1 -c 0 2>&1 | grep -E '^ +[0-9]'
echo "== ar"
ar() { local name=$1; shift; echo "== ar $name"; env $IB "$@" timeout 300 $B/benchmarks/allreduce_perf -np 2 -b 64 -e 256K -f 64 -n 20 -w 2 -c 0 2>&1 | grep -E '^ +[0-9]|tuner'; }
ar default COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=TUNE
ar ring COLL_ALGO=ring
ar rhd COLL_ALGO=rhd
ar tree COLL_ALGO=tree
ar direct COLL_ALGO=direct
ar spin0 COLL_SPIN_US=0
ar ch1 COLL_NCHANNELS=1
ar ch4 COLL_NCHANNELS=4
echo PROF_DONE
