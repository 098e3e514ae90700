#!/bin/bash
# benchmarks/rdma/run.sh [-B BUILD] [-A BUILD] [-o OUT] [-R ROUNDS] [-2] [--quick]
#
# Side by side on one Soft-RoCE link (rdma_rxe on a dummy netdev, one qemu
# TCG guest, tests/rdma/vm.sh): the link's limit (ib_write_bw), coll over
# COLL_NET=ib (sendrecv_perf, allreduce_perf), Open MPI over UCX (rc verbs,
# benchmarks/compare/mpi_perf.c) and Gloo's ibverbs transport (Debian's
# libgloo; gloo_ib_perf.cc, ring and halving-doubling). ROUNDS rounds (default 3), each running every tool once in
# turn; table.py reports medians: OUT/table.md (default BUILD/rdma-bench).
# -A BUILD adds a second coll build (e.g. main's) to every round, right after
# the first one's runs: the "coll-A" columns, for A/B comparisons in one run.
#
# Under TCG these figures say nothing about real hardware: rxe is a kernel
# software path, the guest's one vCPU runs both ranks and rxe, and the host
# is shared. They compare the tools with each other on the same link.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
B=$SRC/build A="" OUT="" R=3 QUICK=0 TWO=""
while [ $# -gt 0 ]; do
  case $1 in
    -B) B=$(realpath "$2"); shift 2 ;;
    -A) A=$(realpath "$2"); shift 2 ;;
    -o) OUT=$(realpath -m "$2"); shift 2 ;;
    -R) R=$2; shift 2 ;;
    --quick) QUICK=1; R=1; shift ;;
    -2) TWO=-2; shift ;;
    *) echo "usage: $0 [-B BUILD] [-A BUILD] [-o OUT] [-R ROUNDS] [-2] [--quick]" >&2; exit 2 ;;
  esac
done
for b in $B $A; do [ -x "$b/benchmarks/allreduce_perf" ] || { echo "build $b first" >&2; exit 2; }; done
OUT=${OUT:-$B/rdma-bench${TWO:+-two}}
case $OUT/ in /tmp/*|/var/tmp/*|/run/*) echo "$0: -o must not be under /tmp, /var/tmp or /run (the guest has its own)" >&2; exit 2 ;; esac
mkdir -p "$OUT/bin"
CFLAGS="-O2 -Wall"
# Open MPI build of the peer benchmark
mpicc.openmpi $CFLAGS -std=c11 -o "$OUT/bin/mpi_perf.openmpi" "$SRC/benchmarks/compare/mpi_perf.c"
# Gloo over its ibverbs transport (classic algorithm classes only)
g++ $CFLAGS -std=c++17 -I"$SRC/benchmarks/compare" -o "$OUT/bin/gloo_ib_perf" "$HERE/gloo_ib_perf.cc" \
  -lgloo -libverbs -pthread
rm -rf "$OUT/raw" "$OUT/vm" && mkdir -p "$OUT/raw"
cd "$SRC"
COLL_VM_ENV="BENCH_B BENCH_A BENCH_BIN BENCH_R BENCH_QUICK" BENCH_B=$B BENCH_A=$A BENCH_BIN=$OUT/bin BENCH_R=$R BENCH_QUICK=$QUICK \
  bash tests/rdma/vm.sh $TWO -t 3000 -o "$OUT/vm" "$HERE/guest_bench.sh"
cp "$OUT"/vm/a/raw/* "$OUT/raw/"
[ -n "$TWO" ] && cp "$OUT"/vm/b/raw/ib_write_bw.* "$OUT/raw/" # the client's side has the figures
python3 "$HERE/table.py" "$OUT/raw" ${TWO:+--two} > "$OUT/table.md"
cat "$OUT/table.md"
