#!/bin/bash
# guest_bench.sh - runs inside the guest(s) for benchmarks/rdma/run.sh: every
# tool BENCH_R times in turn on rxe0; raw outputs in $VMOUT/raw. One guest:
# both ranks on rxe0 over a dummy netdev. Two guests (VM_NODES=2): one rank
# per guest over the virtual wire (eth0); Open MPI is left out (nothing in
# the guests can start a remote rank).
. tests/rdma/guest_lib.sh
N=${VM_NODE:-0} NODES=${VM_NODES:-1}
if [ "$NODES" = 2 ]; then
  hostname "node$N"
  rxe_up eth0 "198.18.0.$((N + 1))" || exit 3
  for _ in $(seq 150); do busybox ping -c1 -W1 "198.18.0.$((2 - N))" >/dev/null 2>&1 && break; sleep 0.2; done
else
  rxe_up dummy0 198.18.0.1 || exit 3
fi
SH=/tmp/vmshared
# meet NAME: both guests reach this point (two guests only)
meet() {
  [ "$NODES" = 2 ] || return 0
  touch "$SH/$1.$N"
  for _ in $(seq 3000); do [ -e "$SH/$1.0" ] && [ -e "$SH/$1.1" ] && return 0; sleep 0.1; done
  echo "meet $1: the other guest did not come" >&2
  return 1
}
B=$BENCH_B BIN=$BENCH_BIN R=$BENCH_R
O=$VMOUT/raw
mkdir -p "$O"
export COLL_SOCKET_IFNAME=lo
[ "$NODES" = 2 ] && export COLL_SOCKET_IFNAME=eth0
LINK_SIZES="65536 262144 1048576 4194304"
if [ "$BENCH_QUICK" = 1 ]; then LINK_SIZES="1048576"; AR="-b 8 -e 1M -f 32"; SR="-b 1M -e 1M -f 2"; NI=3
else AR="-b 8 -e 8M -f 4"; SR="-b 64K -e 4M -f 4"; NI=5; fi
IB="COLL_NET=ib COLL_SHM_DISABLE=1 COLL_MAILBOX_BYTES=0"
UCX="-x UCX_NET_DEVICES=rxe0:1 -x UCX_TLS=rc,self -x UCX_UD_ETH_DGID_CHECK=n"
BWPORT=18600
bw() { # FLAGS SIZE: the client's summary line (guest 0 serves, guest 1 or a local client connects)
  local srv=127.0.0.1 p=$((BWPORT++)) # a fresh port each time: a reused one can meet the last run's server
  set -- "$1 -p $p" "$2"
  if [ "$NODES" = 2 ]; then
    srv=198.18.0.1
    if [ "$N" = 0 ]; then ib_write_bw $1 -F -d rxe0 -x 1 -s $2 -n 20 --report_gbits >/dev/null 2>&1; return; fi
    for _ in $(seq 50); do
      ib_write_bw $1 -F -d rxe0 -x 1 -s $2 -n 20 --report_gbits $srv > /tmp/bw.out 2>&1 && break
      sleep 0.3
    done
    grep -A1 '#bytes' /tmp/bw.out | tail -1
    return
  fi
  ib_write_bw $1 -F -d rxe0 -x 1 -s $2 -n 20 --report_gbits >/dev/null 2>&1 &
  sleep 1
  ib_write_bw $1 -F -d rxe0 -x 1 -s $2 -n 20 --report_gbits $srv 2>&1 | grep -A1 '#bytes' | tail -1
  wait
}
# coll_bench NAME ARGS: one rank here (two guests) or -np 2; "-y 1" in ARGS
# (blocking calls on the NULL stream) writes coll_NAME_blocking.R; with
# BENCH_A the same again with that build, into coll_A_NAME...
coll_bench() {
  local name=$1 SUF="" b p; shift
  case " $* " in *" -y 1 "*) SUF=_blocking ;; esac
  for b in $B $BENCH_A; do
    p=coll_; [ "$b" = "$B" ] || p=coll_A_
    if [ "$NODES" = 2 ]; then
      env $IB RANK=$N WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=198.18.0.1 MASTER_PORT=$((17300 + PORTK++ * 2)) \
        timeout 900 "$b/benchmarks/$name" "$@" > "$O/$p${name%_perf}$SUF.$r" 2>&1
    else
      env $IB timeout 900 "$b/benchmarks/$name" -np 2 "$@" > "$O/$p${name%_perf}$SUF.$r" 2>&1
    fi
  done
}
gloo_bench() { # ALGO FILE
  if [ "$NODES" = 2 ]; then
    mkdir -p "$SH/gloo.$1.$r"
    timeout 900 "$BIN/gloo_ib_perf" -np 2 -r $N -S "$SH/gloo.$1.$r" -C allreduce -A $1 $AR -n $NI -w 1 -c 1 > "$O/$2.$r" 2>&1
  else
    timeout 900 "$BIN/gloo_ib_perf" -np 2 -C allreduce -A $1 $AR -n $NI -w 1 -c 1 > "$O/$2.$r" 2>&1
  fi
}
PORTK=0
for r in $(seq "$R"); do
  echo "== round $r"
  meet "bw.$r"
  for s in $LINK_SIZES; do echo "uni $(bw '' $s)"; echo "bidi $(bw -b $s)"; done > "$O/ib_write_bw.$r"
  meet "sr.$r"
  coll_bench sendrecv_perf $SR -n $NI -w 1 -c 1
  meet "ar.$r"
  coll_bench allreduce_perf $AR -n $NI -w 1 -c 1
  meet "arb.$r"
  coll_bench allreduce_perf $AR -n $NI -w 1 -c 1 -y 1 # blocking, in the caller's thread (as the peers' calls)
  if [ "$NODES" = 1 ]; then
    timeout 900 mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ucx --mca btl ^openib,vader,tcp $UCX \
      "$BIN/mpi_perf.openmpi" -C allreduce $AR -n $NI -w 1 -c 1 > "$O/ompi_ucx_allreduce.$r" 2>&1
  fi
  meet "gr.$r"
  gloo_bench ring gloo_ib_ring
  meet "gh.$r"
  gloo_bench halving_doubling gloo_ib_hd
  tail -n 3 "$O"/*."$r" | grep -v "^$"
done
echo BENCH_DONE
