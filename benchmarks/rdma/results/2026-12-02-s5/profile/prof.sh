. tests/rdma/guest_lib.sh
rxe_up dummy0 198.18.0.1 || exit 3
B=$PROF_B; O=$VMOUT
export COLL_SOCKET_IFNAME=lo
IB="COLL_NET=ib COLL_SHM_DISABLE=1 COLL_MAILBOX_BYTES=0"
run() { # name args
  local n=$1; shift
  echo "== $n: $*"
  env $IB "$@" 2>&1 | grep -v "^#" | grep -v "^$" | tail -8
}
SR="$B/benchmarks/sendrecv_perf -np 2 -b 64K -e 1M -f 4 -n 5 -w 1 -c 1"
AR="$B/benchmarks/allreduce_perf -np 2 -b 8 -e 2K -f 16 -n 20 -w 2 -c 1 -y 1"
for i in 1 2; do
run sr_default $SR
run sr_spin0 COLL_SPIN_US=0 $SR
run ar_default $AR
run ar_spin0 COLL_SPIN_US=0 $AR
done
run ar_spin0_strace strace -f -c -o $O/ar_strace.txt env COLL_SPIN_US=0 $AR
run ar_default_strace strace -f -c -o $O/ar_strace_def.txt $AR
run sr_strace strace -f -c -o $O/sr_strace.txt $SR
run ar_perf perf stat -e context-switches,cpu-migrations,task-clock -o $O/ar_perf.txt $AR
env $IB $AR >/dev/null 2>&1 & sleep 3; for p in $(pgrep -f allreduce_perf); do echo "pid $p threads $(ls /proc/$p/task | wc -l) $(cat /proc/$p/comm)"; for t in /proc/$p/task/*; do echo "  $(cat $t/comm) $(grep ctxt $t/status | tr '\n' ' ')"; done; done; wait
cat /proc/loadavg
echo PROF_DONE
