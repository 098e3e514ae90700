# guest script: the tuner's model line and all-reduce picks 8 B-8 MiB, 2 ranks over ib in one guest,
# main's build (PROF_A) and this branch's (PROF_B), default and COLL_TUNE_CALIBRATE=1
. tests/rdma/guest_lib.sh
rxe_up dummy0 198.18.0.1 || exit 3
export COLL_SOCKET_IFNAME=lo
IB="COLL_NET=ib COLL_SHM_DISABLE=1 COLL_MAILBOX_BYTES=0"
for b in A B; do
  d=$PROF_A; [ $b = B ] && d=$PROF_B
  for cal in 0 1; do
    echo "== build $b calibrate $cal"
    env $IB LD_LIBRARY_PATH=$d COLL_TUNE_CALIBRATE=$cal COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=TUNE timeout 120 $d/benchmarks/allreduce_perf -np 2 -b 8 -e 8M -f 4 -n 1 -w 0 -c 0 -y 1 --show_algo 1 2>&1 | grep -E "tuner model|tuner: allreduce" | grep -v "guest:[0-9]*:[0-9]* .*rank 1" | sed 's/.*INFO //' | sort -u
  done
done
echo PICKS_DONE
