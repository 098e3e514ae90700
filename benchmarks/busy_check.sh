#!/usr/bin/env bash
# busy_check.sh - issue 17 point 1: small all-reduce latency on a busy
# machine, coll beside Open MPI in one run. All-reduce float32 sum, 8 B to
# 1 MiB, 2 and 4 ranks, with 0, 1 and 2 CPU-bound load processes that this
# script starts before and stops after every (load, ranks) block (and on
# any exit: trap, and each load process is also bounded by `timeout`).
# Rounds interleave everything (round 1 of every load level, library and
# rank count, then round 2, ...), so machine noise spreads over all cells;
# each cell is the median over rounds of the out-of-place time per call
# (-w warm-up calls, a barrier, -n timed calls, time = total / n, max over
# ranks), for coll on the NULL stream (blocking, as MPI_Allreduce).
# Rules (issue 17), per rank count and load level L >= 1:
#   vs Open MPI:  coll time <= Open MPI time, at every size;
#   vs quiet:     coll time at load L <= 3 x coll time at load 0.
# Load 0 is "no load of ours": the machine may be shared, so the load
# average before and after each block is printed beside the tables.
# Placement (-P): "none": no library binds its ranks (Open MPI with
# --bind-to none, coll's -np launcher as always); "core": each library binds
# as Open MPI does by default (one core per rank while ranks <= cores, else
# no binding): Open MPI's default, coll with COLL_TESTS_BIND=core. Each
# placement gets its own tables.
#
#   benchmarks/busy_check.sh [-B BUILD] [-np "2 4"] [-L "0 1 2"] [-R 3]
#       [-P "none core"] [-w 10] [-n 50] [-S "8,16,64,..."] [-l "coll ompi"] [-o FILE]
#       [-E "VAR=VALUE ..."] [--smoke]
#
#   -B DIR    coll build directory (benchmarks/allreduce_perf); default build
#   -np LIST  rank counts (default "2 4")
#   -L LIST   load processes (default "0 1 2")
#   -R N      rounds (default 3)
#   -P LIST   placements (default "none core", see above)
#   -w/-n     warm-up and timed calls per size (default 10 and 50)
#   -S LIST   sizes (default 8,16,64,256,1K,4K,16K,64K,256K,1M)
#   -l LIST   libraries (default "coll ompi"; ompi is skipped with a note
#             when mpicc.openmpi is missing)
#   -E ENV    extra environment for coll's runs (e.g. "COLL_SPIN_US=1000");
#             repeat -E to run coll once per setting, side by side, named
#             coll, coll1, coll2, ... (each is judged by the rules; the
#             ratio columns are those of the first)
#   -o FILE   also write the report to FILE
#   --smoke   2 ranks, loads 0 and 1, placement none, 1 round, 3 sizes,
#             -n 5 (seconds)
# Exit status: 0 every rule holds, 1 a rule failed, 2 a run failed or gave
# wrong results (smoke: 0 unless a run failed).
set -u
usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit "${1:-2}"; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=build NPS="2 4" LOADS="0 1 2" PLACES="none core" ROUNDS=3 WARM=10 ITERS=50 OUTFILE="" SMOKE=0
SIZES="8,16,64,256,1K,4K,16K,64K,256K,1M" LIBS="coll ompi" XENVS=() NXENV=0
while [ $# -gt 0 ]; do
  case "$1" in
    -B) BUILD=$2; shift 2 ;;
    -np) NPS=$2; shift 2 ;;
    -L) LOADS=$2; shift 2 ;;
    -R) ROUNDS=$2; shift 2 ;;
    -P) PLACES=$2; shift 2 ;;
    -w) WARM=$2; shift 2 ;;
    -n) ITERS=$2; shift 2 ;;
    -S) SIZES=$2; shift 2 ;;
    -l) LIBS=$2; shift 2 ;;
    -E) XENVS[NXENV]=$2; NXENV=$((NXENV + 1)); shift 2 ;;
    -o) OUTFILE=$2; shift 2 ;;
    --smoke) SMOKE=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "busy_check.sh: unknown argument $1" >&2; usage 2 ;;
  esac
done
if [ "$SMOKE" = 1 ]; then NPS=2 LOADS="0 1" PLACES=none ROUNDS=1 SIZES="8,4K,256K" ITERS=5 WARM=2; fi
BIN="$BUILD/benchmarks/allreduce_perf"
[ -x "$BIN" ] || { echo "busy_check.sh: $BIN not found (build first, or -B DIR)" >&2; exit 2; }

WORK=$(mktemp -d /tmp/coll-busy.XXXXXX)
LOADPIDS=()
stop_load() {
  local p
  for p in "${LOADPIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${LOADPIDS[@]}"; do wait "$p" 2>/dev/null; done
  LOADPIDS=()
}
cleanup() { stop_load; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
# One CPU-bound process: a user-space loop (no syscalls), as a data loader
# decoding or another job computing. `timeout` bounds it even if this
# script is killed with SIGKILL.
start_load() {
  local i
  for ((i = 0; i < $1; i++)); do
    timeout -k 1 1800 awk 'BEGIN { for (;;) x++ }' &
    LOADPIDS+=($!)
  done
}

MPIBIN=""
if [[ " $LIBS " == *" ompi "* ]]; then
  if command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null; then
    MPIBIN="$WORK/mpi_perf.openmpi"
    mpicc.openmpi -O2 -std=c11 -o "$MPIBIN" "$HERE/compare/mpi_perf.c" 2>"$WORK/mpicc.log" ||
      { echo "busy_check.sh: building mpi_perf failed:" >&2; cat "$WORK/mpicc.log" >&2; exit 2; }
  else
    echo "# skipped: ompi (mpicc.openmpi / mpirun.openmpi not installed)"
    LIBS=${LIBS//ompi/}
  fi
fi

to_bytes() {
  local s=${1%B} m=1
  case "$s" in *K|*k) m=1024 ;; *M|*m) m=1048576 ;; esac
  echo $((${s%[KkMm]} * m))
}
# coll's benchmark takes -b/-e/-f: one command per geometric run of sizes
coll_runs() {
  local -a s
  local i=0 j b e f
  IFS=, read -ra s <<<"$SIZES"
  while [ $i -lt ${#s[@]} ]; do
    b=$(to_bytes "${s[$i]}"); e=$b; f=2; j=$((i + 1))
    if [ $j -lt ${#s[@]} ]; then
      local n; n=$(to_bytes "${s[$j]}")
      if [ $((n % b)) = 0 ] && [ $((n / b)) -ge 2 ]; then
        f=$((n / b))
        while [ $j -lt ${#s[@]} ] && [ "$(to_bytes "${s[$j]}")" = $((e * f)) ]; do e=$((e * f)); j=$((j + 1)); done
      fi
    fi
    echo "$b $e $f"
    i=$j
  done
}
failed=0
runOne() {  # lib np load round placement
  local lib=$1 np=$2 out="$WORK/$1.$5.$2.$3.$4" check=0 b e f XENV="" bind="" mbind=""
  [ "$4" = 0 ] && check=1
  if [ "$5" = core ]; then bind="COLL_TESTS_BIND=core"; else mbind="--bind-to none"; fi
  if [[ "$lib" == coll* ]]; then
    local k=${lib#coll}
    XENV=${XENVS[${k:-0}]:-}
    while read -r b e f; do
      if ! env $bind $XENV timeout -k 5 300 "$BIN" -np "$np" -b "$b" -e "$e" -f "$f" -w "$WARM" -n "$ITERS" \
          -c "$check" -a 3 -d float -o sum -y 1 >>"$out" 2>"$WORK/err"; then
        echo "busy_check.sh: coll -np $np load $3 failed:" >&2; tail -5 "$WORK/err" >&2; failed=1
      fi
    done < <(coll_runs)
  else
    if ! timeout -k 5 300 mpirun.openmpi --oversubscribe --allow-run-as-root --mca btl self,vader,tcp \
        --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo $mbind -np "$np" "$MPIBIN" -C allreduce \
        -B "$WARM:$ITERS:$SIZES" -c "$check" -d float -o sum >>"$out" 2>"$WORK/err"; then
      echo "busy_check.sh: ompi -np $np load $3 failed:" >&2; tail -5 "$WORK/err" >&2; failed=1
    fi
  fi
}

T0=$(date +%s)
[ "$NXENV" = 0 ] && { XENVS=(""); NXENV=1; }
if [ "$NXENV" -gt 1 ] && [[ " $LIBS " == *" coll "* ]]; then
  v=""; for ((k = 1; k < NXENV; k++)); do v="$v coll$k"; done
  LIBS=${LIBS/coll/coll$v}
fi
echo "# busy_check: $(nproc) cpus; coll $(git -C "$HERE" describe --always --dirty 2>/dev/null)"
for ((k = 0; k < NXENV; k++)); do
  [ -n "${XENVS[$k]}" ] && echo "# coll$([ $k = 0 ] || echo $k) runs with: ${XENVS[$k]}"
done
for ((r = 0; r < ROUNDS; r++)); do
  for L in $LOADS; do
    start_load "$L"
    sleep 0.2
    l0=$(cut -d' ' -f1 /proc/loadavg)
    for pl in $PLACES; do
      for np in $NPS; do
        for lib in $LIBS; do runOne "$lib" "$np" "$L" "$r" "$pl"; done
      done
    done
    echo "$r $L $l0 $(cut -d' ' -f1 /proc/loadavg)" >>"$WORK/loads"
    stop_load
  done
done

python3 - "$WORK" "$SMOKE" "$(( $(date +%s) - T0 ))" "$ROUNDS" "$LOADS" "$NPS" "$LIBS" "$PLACES" <<'PY' | tee "$WORK/report"
import statistics, sys, glob, os
work, smoke, secs, rounds = sys.argv[1:5]
loads = [int(x) for x in sys.argv[5].split()]
nps = sys.argv[6].split()
libs = sys.argv[7].split()
places = sys.argv[8].split()
colls = [l for l in libs if l.startswith("coll")]
status = 0
data = {}  # (lib, np, load) -> size -> [us]
for path in glob.glob(f"{work}/*.*.*.*.*"):
    lib, pl, np, load, rnd = os.path.basename(path).split(".")
    for ln in open(path):
        f = ln.split()
        if ln.startswith("#") or len(f) < 13:
            continue
        try:
            size, t = int(f[0]), float(f[5])
        except ValueError:
            continue
        for w in (f[8], f[12]):
            if w not in ("N/A", "0"):
                print(f"WRONG RESULTS: {lib} {pl} np {np} load {load} size {size}", file=sys.stderr)
                status = 2
        data.setdefault((lib, pl, np, int(load)), {}).setdefault(size, []).append(t)
la = {}
for ln in open(f"{work}/loads"):
    r, L, a, b = ln.split()
    la.setdefault(int(L), []).extend([float(a), float(b)])
print(f"# all-reduce float32 sum, out-of-place, median of {rounds} rounds (time per call in us, max over ranks), {secs} s")
print("# load average (1 min) seen per load level: " +
      ", ".join(f"{L} procs: {min(v):.1f}-{max(v):.1f}" for L, v in sorted(la.items())))
def med(k, s):
    v = data.get(k, {}).get(s)
    return statistics.median(v) if v else None
fails = {c: [0, 0] for c in colls}  # vs ompi, vs quiet
q0 = loads[0]
for pl in places:
    for np in nps:
        sizes = sorted(set().union(*[set(data.get((l, pl, np, L), {})) for l in libs for L in loads]))
        bound = "each library binds as Open MPI's default" if pl == "core" else "no binding"
        print(f"\n## {np} ranks on {os.cpu_count()} cores, placement {pl} ({bound})\n")
        head = ["size"]
        for L in loads:
            head += [f"{c} L{L}" for c in colls]
            if "ompi" in libs:
                head += [f"ompi L{L}", f"{colls[0]}/ompi"]
            if L != q0:
                head.append(f"L{L}/L{q0}")
        print("| " + " | ".join(head) + " |")
        print("|" + "---:|" * len(head))
        for s in sizes:
            cells = [str(s)]
            for L in loads:
                m = med(("ompi", pl, np, L), s) if "ompi" in libs else None
                for c in colls:
                    t = med((c, pl, np, L), s)
                    cells.append(f"{t:.2f}" if t is not None else "-")
                    q = med((c, pl, np, q0), s)
                    if L != q0 and t is not None:
                        if m is not None and t > m:
                            fails[c][0] += 1
                        if q and t > 3 * q:
                            fails[c][1] += 1
                t, q = med((colls[0], pl, np, L), s), med((colls[0], pl, np, q0), s)
                if "ompi" in libs:
                    cells.append(f"{m:.2f}" if m is not None else "-")
                    if t is not None and m:
                        bad = t > m and L != q0
                        cells.append(f"{t / m:.2f}{' FAIL' if bad else ''}")
                    else:
                        cells.append("-")
                if L != q0:
                    if t is not None and q:
                        cells.append(f"{t / q:.1f}{' FAIL' if t > 3 * q else ''}")
                    else:
                        cells.append("-")
            print("| " + " | ".join(cells) + " |")
print()
print(f"# rules at load >= 1 ({len(places) * len(nps) * len(loads[1:])} blocks): coll <= Open MPI; coll <= 3 x coll at load {q0}")
for c in colls:
    vs = "" if "ompi" in libs else " (no Open MPI)"
    print(f"# {c}: {fails[c][0]} sizes slower than Open MPI{vs}, {fails[c][1]} sizes above 3x its own L{q0}")
    if fails[c][0] or fails[c][1]:
        status = max(status, 1)
print("# result: " + {0: "every rule holds", 1: "a rule FAILED", 2: "a run failed or gave wrong results"}[status])
if smoke == "1" and status == 1:
    status = 0
sys.exit(status)
PY
rc=${PIPESTATUS[0]}
[ -n "$OUTFILE" ] && cp "$WORK/report" "$OUTFILE"
[ "$failed" = 1 ] && rc=2
exit "$rc"
