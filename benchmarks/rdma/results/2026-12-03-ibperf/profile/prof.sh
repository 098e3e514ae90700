# guest script: what one all-reduce call costs (2 ranks, one guest, blocking -y 1)
. tests/rdma/guest_lib.sh
rxe_up dummy0 198.18.0.1 || exit 3
B=$PROF_B; O=$VMOUT
export COLL_SOCKET_IFNAME=lo
IB="COLL_NET=ib COLL_SHM_DISABLE=1 COLL_MAILBOX_BYTES=0"
for s in 8 2048 524288 8388608; do
  n=40; [ $s -ge 524288 ] && n=6
  AR="$B/benchmarks/allreduce_perf -np 2 -b $s -e $s -n $n -w 1 -c 1 -y 1"
  echo "== $s plain"; env $IB $AR --show_algo 1 2>&1 | grep -v "^#" | grep -v "^$" | tail -3
  echo "== $s tune"; env $IB COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=TUNE $AR 2>&1 | grep -i "allreduce\|all-reduce" | sort | uniq -c | head -8
  echo "== $s strace (n=$n +1 warmup, 2 ranks)"
  env $IB strace -f -c -o $O/strace.$s.txt $AR > /dev/null 2>&1
  head -20 $O/strace.$s.txt
done
cat /proc/loadavg
echo PROF_DONE
