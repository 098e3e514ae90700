#!/bin/bash
# guest_bench.sh - runs inside the guest for benchmarks/rdma/run.sh: every
# tool BENCH_R times in turn on rxe0; raw outputs in $VMOUT/raw.
. tests/rdma/guest_lib.sh
rxe_up dummy0 198.18.0.1 || exit 3
B=$BENCH_B BIN=$BENCH_BIN R=$BENCH_R
O=$VMOUT/raw
mkdir -p "$O"
export COLL_SOCKET_IFNAME=lo
LINK_SIZES="65536 262144 1048576 4194304"
if [ "$BENCH_QUICK" = 1 ]; then LINK_SIZES="1048576"; AR="-b 8 -e 1M -f 32"; SR="-b 1M -e 1M -f 2"; N=3
else AR="-b 8 -e 8M -f 8"; SR="-b 64K -e 4M -f 4"; N=5; fi
IB="COLL_NET=ib COLL_SHM_DISABLE=1 COLL_MAILBOX_BYTES=0"
UCX="-x UCX_NET_DEVICES=rxe0:1 -x UCX_TLS=rc,self -x UCX_UD_ETH_DGID_CHECK=n"
bw() { # FLAGS SIZE: the client's summary line
  ib_write_bw $1 -F -d rxe0 -x 1 -s $2 -n 20 --report_gbits >/dev/null 2>&1 &
  sleep 1
  ib_write_bw $1 -F -d rxe0 -x 1 -s $2 -n 20 --report_gbits 127.0.0.1 2>&1 | grep -A1 '#bytes' | tail -1
  wait
}
for r in $(seq "$R"); do
  echo "== round $r"
  for s in $LINK_SIZES; do echo "uni $(bw '' $s)"; echo "bidi $(bw -b $s)"; done > "$O/ib_write_bw.$r"
  env $IB timeout 900 "$B/benchmarks/sendrecv_perf" -np 2 $SR -n $N -w 1 -c 1 > "$O/coll_sendrecv.$r" 2>&1
  env $IB timeout 900 "$B/benchmarks/allreduce_perf" -np 2 $AR -n $N -w 1 -c 1 > "$O/coll_allreduce.$r" 2>&1
  timeout 900 mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ucx --mca btl ^openib,vader,tcp $UCX \
    "$BIN/mpi_perf.openmpi" -C allreduce $AR -n $N -w 1 -c 1 > "$O/ompi_ucx_allreduce.$r" 2>&1
  timeout 900 "$BIN/gloo_ib_perf" -np 2 -C allreduce -A ring $AR -n $N -w 1 -c 1 > "$O/gloo_ib_ring.$r" 2>&1
  timeout 900 "$BIN/gloo_ib_perf" -np 2 -C allreduce -A halving_doubling $AR -n $N -w 1 -c 1 > "$O/gloo_ib_hd.$r" 2>&1
  tail -n 3 "$O"/*."$r" | grep -v "^$"
done
echo BENCH_DONE
