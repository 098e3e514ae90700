# guest script: 32 KiB (the one size whose pick changed: direct -> ring) and 8 B, main (A) vs branch (B), 3 rounds interleaved
. tests/rdma/guest_lib.sh
rxe_up dummy0 198.18.0.1 || exit 3
export COLL_SOCKET_IFNAME=lo
IB="COLL_NET=ib COLL_SHM_DISABLE=1 COLL_MAILBOX_BYTES=0"
for r in 1 2 3; do
  echo "#### round $r $(cat /proc/loadavg)"
  for b in A B; do
    d=$PROF_A; [ $b = B ] && d=$PROF_B
    for s in 8 32K; do
      echo "== $b $s"; env $IB LD_LIBRARY_PATH=$d timeout 120 $d/benchmarks/allreduce_perf -np 2 -b $s -e $s -n 30 -w 3 -c 1 -y 1 --show_algo 1 2>&1 | grep -v "^#" | grep -v "^$" | awk '{print $1, $6, $10, $NF}'
    done
  done
done
echo AB_DONE
