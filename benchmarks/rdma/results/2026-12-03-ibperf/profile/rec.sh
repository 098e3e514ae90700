# guest script: where the vCPU's time goes in 8 B blocking all-reduces (perf record, cpu-clock), coll and Open MPI
. tests/rdma/guest_lib.sh
rxe_up dummy0 198.18.0.1 || exit 3
B=$PROF_B; BIN=$PROF_BIN; O=$VMOUT
export COLL_SOCKET_IFNAME=lo
IB="COLL_NET=ib COLL_SHM_DISABLE=1 COLL_MAILBOX_BYTES=0"
env $IB perf record -a -e cpu-clock -F 2000 -o /tmp/c.data -- $B/benchmarks/allreduce_perf -np 2 -b 8 -e 8 -n 400 -w 1 -c 1 -y 1 2>&1 | grep -v "^#" | grep -v "^$"
perf report -i /tmp/c.data --sort comm,dso --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -25
perf report -i /tmp/c.data --sort sym --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -40
perf record -a -e cpu-clock -F 2000 -o /tmp/o.data -- mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ucx --mca btl ^openib,vader,tcp -x UCX_NET_DEVICES=rxe0:1 -x UCX_TLS=rc,self -x UCX_UD_ETH_DGID_CHECK=n $BIN/mpi_perf.openmpi -C allreduce -b 8 -e 8 -n 400 -w 1 -c 1 2>&1 | grep -v "^#" | grep -v "^$"
perf report -i /tmp/o.data --sort comm,dso --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -25
perf report -i /tmp/o.data --sort sym --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -40
echo REC_DONE
