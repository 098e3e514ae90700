# guest script: engine knobs on the blocking all-reduce, 2 ranks, one guest; interleaved, 2 rounds
. tests/rdma/guest_lib.sh
rxe_up dummy0 198.18.0.1 || exit 3
B=$PROF_B; BIN=$PROF_BIN
export COLL_SOCKET_IFNAME=lo
IB="COLL_NET=ib COLL_SHM_DISABLE=1 COLL_MAILBOX_BYTES=0"
L="-b 512K -e 8M -f 4 -n 3 -w 1 -c 1"
S="-b 8 -e 32K -f 16 -n 20 -w 2 -c 1"
ar() { local n=$1 a=$2; shift 2; echo "== $n"; env $IB "$@" timeout 300 $B/benchmarks/allreduce_perf -np 2 $a -y 1 --show_algo 1 2>&1 | grep -v "^#" | grep -v "^$" | awk '{print $1, $6, $10, $NF}'; }
for r in 1 2; do
  echo "#### round $r $(cat /proc/loadavg)"
  ar L.default "$L"
  ar L.chunk1M "$L" COLL_CHUNKSIZE=1048576
  ar L.chunk4M "$L" COLL_CHUNKSIZE=4194304
  ar L.nch1 "$L" COLL_NCHANNELS=1
  ar L.nch1.chunk4M "$L" COLL_NCHANNELS=1 COLL_CHUNKSIZE=4194304
  ar L.direct "$L" COLL_ALGO=allreduce:direct
  ar L.rhd "$L" COLL_ALGO=allreduce:rhd
  echo "== L.gloo_ring"; timeout 300 $BIN/gloo_ib_perf -np 2 -C allreduce -A ring $L 2>&1 | grep -v "^#" | grep -v "^$" | awk '{print $1, $6, $10}'
  ar S.default "$S"
  ar S.spin0 "$S" COLL_SPIN_US=0
  ar S.spin100 "$S" COLL_SPIN_US=100
  ar S.spin5000 "$S" COLL_SPIN_US=5000
  echo "== S.ompi"; timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ucx --mca btl ^openib,vader,tcp -x UCX_NET_DEVICES=rxe0:1 -x UCX_TLS=rc,self -x UCX_UD_ETH_DGID_CHECK=n $BIN/mpi_perf.openmpi -C allreduce $S 2>&1 | grep -v "^#" | grep -v "^$" | awk '{print $1, $6, $10}'
done
cat /proc/loadavg
echo KNOBS_DONE
