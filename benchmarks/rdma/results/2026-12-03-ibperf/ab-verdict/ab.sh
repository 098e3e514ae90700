# guest script: A/B of the kept "own ranks" verdict (new = branch, main = main), blocking all-reduce,
# 2 ranks, one guest; syscalls of 8 B calls by perf tracepoints; Open MPI as the reference; interleaved rounds
. tests/rdma/guest_lib.sh
rxe_up dummy0 198.18.0.1 || exit 3
BIN=$PROF_BIN; O=$VMOUT
export COLL_SOCKET_IFNAME=lo
IB="COLL_NET=ib COLL_SHM_DISABLE=1 COLL_MAILBOX_BYTES=0"
S="-b 8 -e 32K -f 4 -n 20 -w 2 -c 1"
EV=context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_openat,syscalls:sys_enter_sched_yield,syscalls:sys_enter_write
for r in 1 2 3; do
  echo "#### round $r $(cat /proc/loadavg)"
  for v in new main; do
    b=$PROF_B; [ $v = main ] && b=$PROF_A
    echo "== $v"; env $IB timeout 300 $b/benchmarks/allreduce_perf -np 2 $S -y 1 2>&1 | grep -v "^#" | grep -v "^$" | awk '{print $1, $6, $10}'
  done
  echo "== ompi"; timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ucx --mca btl ^openib,vader,tcp -x UCX_NET_DEVICES=rxe0:1 -x UCX_TLS=rc,self -x UCX_UD_ETH_DGID_CHECK=n $BIN/mpi_perf.openmpi -C allreduce $S 2>&1 | grep -v "^#" | grep -v "^$" | awk '{print $1, $6, $10}'
done
for v in new main; do
  b=$PROF_B; [ $v = main ] && b=$PROF_A
  for n in 20 220; do
    env $IB perf stat -x, -e $EV -o $O/perf.$v.$n.txt $b/benchmarks/allreduce_perf -np 2 -b 8 -e 8 -n $n -w 1 -c 1 -y 1 > /dev/null 2>&1
    echo "perf $v n=$n: $(grep -v '^#' $O/perf.$v.$n.txt | grep , | awk -F, '{printf "%s=%s ", $3, $1}')"
  done
done
cat /proc/loadavg
echo AB_DONE
