# guest script: the syscall sequence of 8 B blocking all-reduces (2 ranks), and perf counts
. tests/rdma/guest_lib.sh
rxe_up dummy0 198.18.0.1 || exit 3
B=$PROF_B; O=$VMOUT
export COLL_SOCKET_IFNAME=lo
IB="COLL_NET=ib COLL_SHM_DISABLE=1 COLL_MAILBOX_BYTES=0"
for n in 20 120; do
  echo "== perf n=$n"
  env $IB perf stat -e context-switches,raw_syscalls:sys_enter,task-clock -o $O/perf.$n.txt $B/benchmarks/allreduce_perf -np 2 -b 8 -e 8 -n $n -w 1 -c 1 -y 1 2>&1 | grep -v "^#" | grep -v "^$"
  cat $O/perf.$n.txt
done
env $IB strace -f -tt -o $O/seq.txt $B/benchmarks/allreduce_perf -np 2 -b 8 -e 8 -n 30 -w 1 -c 1 -y 1 > /dev/null 2>&1
echo SEQ_DONE
