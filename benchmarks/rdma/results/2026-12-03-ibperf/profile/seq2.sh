# guest script: syscalls per 8 B blocking all-reduce by kind (perf tracepoints), coll against Open MPI
. tests/rdma/guest_lib.sh
rxe_up dummy0 198.18.0.1 || exit 3
B=$PROF_B; BIN=$PROF_BIN; O=$VMOUT
export COLL_SOCKET_IFNAME=lo
IB="COLL_NET=ib COLL_SHM_DISABLE=1 COLL_MAILBOX_BYTES=0"
EV=context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_sched_yield,syscalls:sys_enter_write,syscalls:sys_enter_poll,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_futex,syscalls:sys_enter_read,syscalls:sys_enter_pread64,syscalls:sys_enter_openat
env $IB COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=INIT $B/benchmarks/allreduce_perf -np 2 -b 8 -e 8 -n 1 -w 0 -c 1 -y 1 2>&1 | grep -i "wait\|spin\|core" | head -4
for n in 50 250; do
  for sp in -1 0; do
  echo "== coll n=$n spin=$sp"
  env $IB COLL_SPIN_US=$sp perf stat -e $EV -o $O/perf.c.$n.$sp.txt $B/benchmarks/allreduce_perf -np 2 -b 8 -e 8 -n $n -w 1 -c 1 -y 1 2>&1 | grep -v "^#" | grep -v "^$"
  grep -v "^#\|^$" $O/perf.c.$n.$sp.txt | awk '{print $1, $2}'
  done
  echo "== ompi n=$n"
  perf stat -e $EV -o $O/perf.o.$n.txt mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ucx --mca btl ^openib,vader,tcp -x UCX_NET_DEVICES=rxe0:1 -x UCX_TLS=rc,self -x UCX_UD_ETH_DGID_CHECK=n $BIN/mpi_perf.openmpi -C allreduce -b 8 -e 8 -n $n -w 1 -c 1 2>&1 | grep -v "^#" | grep -v "^$"
  grep -v "^#\|^$" $O/perf.o.$n.txt | awk '{print $1, $2}'
done
echo SEQ_DONE
