# guest script: rxe hw_counters before/after each variant of the 8 MiB blocking all-reduce, 2 ranks, one guest
. tests/rdma/guest_lib.sh
rxe_up dummy0 198.18.0.1 || exit 3
B=$PROF_B; BIN=$PROF_BIN
export COLL_SOCKET_IFNAME=lo
IB="COLL_NET=ib COLL_SHM_DISABLE=1 COLL_MAILBOX_BYTES=0"
H=/sys/class/infiniband/rxe0/ports/1/hw_counters
snap() { for f in $H/*; do echo "$(basename $f) $(cat $f)"; done; }
delta() { snap > /tmp/after; join /tmp/before /tmp/after | awk '$3 != $2 {printf "  %s %d\n", $1, $3 - $2}'; }
L="-b 8M -e 8M -n 3 -w 1 -c 1"
for r in 1 2; do
  for v in default chunk1M gloo; do
    echo "== $v round $r $(cat /proc/loadavg)"
    snap > /tmp/before
    case $v in
      default) env $IB timeout 300 $B/benchmarks/allreduce_perf -np 2 $L -y 1 --show_algo 1 2>&1 | grep -v "^#" | grep -v "^$" | awk '{print $1, $6, $10, $NF}' ;;
      chunk1M) env $IB COLL_CHUNKSIZE=1048576 timeout 300 $B/benchmarks/allreduce_perf -np 2 $L -y 1 --show_algo 1 2>&1 | grep -v "^#" | grep -v "^$" | awk '{print $1, $6, $10, $NF}' ;;
      gloo) timeout 300 $BIN/gloo_ib_perf -np 2 -C allreduce -A ring $L 2>&1 | grep -v "^#" | grep -v "^$" | awk '{print $1, $6, $10}' ;;
    esac
    delta
  done
done
echo CNT_DONE
