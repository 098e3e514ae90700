#!/usr/bin/env bash
# run.sh - one command for the table that puts coll beside what users already
# have: coll's allreduce_perf / allgather_perf / reducescatter_perf against
# Open MPI, MPICH, Gloo and torch.distributed (gloo backend) on this host, on
# the same sizes, type (float32, sum), rank counts and iteration counts.
#
#   benchmarks/compare/run.sh -B build [-o compare-out] [-R 3] [--smoke]
#
# Output (-o DIR): raw/ (one log per library, collective, rank count and
# run, with the exact command and the load average), table.md (one table per
# collective and rank count: median busbw per size per library, coll / best
# peer, and coll as a fraction of the memory limit), results.csv,
# membw.txt (copy bandwidth of one core and of all cores per working set,
# 8 MiB .. 2 GiB, before and after the libraries ran), allreduce.png / allgather.png / reducescatter.png.
#
# Fair rules (enforced by the peer sources in this directory and by coll's
# benchmarks/common.c):
#  * every buffer is allocated once, at the largest size, and touched before
#    any timing (first-touch page faults cost ~0.3 GB/s on this VM);
#  * the peers run with glibc told to keep freed memory (MALLOC_MMAP_MAX_=0,
#    MALLOC_TRIM_THRESHOLD_, MALLOC_ARENA_MAX=1 in the environment, and
#    mallopt in the C/C++ peers), so a library that mallocs a temporary per
#    call is not charged page faults for it; coll runs without this help;
#  * one timing rule for all (nccl-tests'): per size and placement, -w
#    warm-up calls, a barrier, -n timed calls; time = total / n, max over
#    ranks (coll: -a 3); sizes are banded: every library gets the same
#    -w/-n for the same size (defaults below);
#  * blocking calls for everyone: coll runs on the NULL stream (-y 1: the
#    call runs on the caller's thread and returns when done), as
#    MPI_Allreduce and Gloo's run() do;
#  * out-of-place and in-place are both reported. MPI uses MPI_IN_PLACE.
#    Gloo's classic algorithms and torch's all_reduce work in place; their
#    out-of-place column is memcpy + the in-place call (what a user pays for
#    out-of-place semantics). Reduce-scatter in place: MPI and Gloo leave the
#    result at the start of the buffer, coll at rank * count (NCCL's rule);
#  * everyone is checked: after timing, -c 1 call on fresh rank-dependent
#    inputs (small integers, exact in float32), exact compare, #wrong summed
#    over ranks. A peer with #wrong > 0 is flagged and not used as "best";
#  * sizes, counts and busbw as nccl-tests / coll: size = the larger buffer
#    in bytes (all-gather: the gathered output; reduce-scatter: the input),
#    per-rank counts rounded down to 16 bytes (so 8 B all-gather on 2 ranks
#    is 0 elements: such rows are dropped), busbw = algbw * 2(n-1)/n for
#    all-reduce and * (n-1)/n for all-gather and reduce-scatter;
#  * median of -R runs per cell; the runs are interleaved (run 1 of every
#    library, then run 2, ...) so that machine noise spreads evenly;
#  * all traffic stays on this host: Gloo / torch on 127.0.0.1 (lo), Open
#    MPI's TCP paths pinned to lo, MPICH with -iface lo; every command runs
#    under `timeout` (its whole process group is killed).
# Defaults: ranks 2 and 4 (4 is oversubscribed on a 2-core VM), sizes 8 B
# and 16 B .. 1 MiB x4 with -w 5 -n 20, 4 MiB .. 64 MiB x4 with -w 1 -n 5,
# 256 MiB with -w 1 -n 3; -R 3, results checked in run 1 (-C). --smoke: 2
# ranks, 64 B and 64 KiB, -w 1 -n 3, one run, peers whose package is missing
# are skipped (no apt-get). Exit status: non-zero when coll fails (error,
# wrong result, timeout) or a library that ran produced no rows.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=build OUT=compare-out RUNS=3 NPS="2 4" SMOKE=0 INSTALL=1 TMO="" CHECKRUNS=1
COLLS="allreduce allgather reducescatter"
LIBS="coll ompi mpich gloo torch"
BANDS=("5:20:8,16,64,256,1K,4K,16K,64K,256K,1M" "1:5:4M,16M,64M" "1:3:256M")

usage() {
  cat <<EOF
usage: $0 -B BUILD_DIR [options]
  -B DIR      coll build directory (holds benchmarks/allreduce_perf); default build
  -o DIR      output directory; default compare-out
  -R N        runs per cell (median); default 3
  -p "2 4"    rank counts
  -c "..."    collectives (allreduce allgather reducescatter)
  -l "..."    libraries (coll ompi mpich gloo torch)
  -S W:N:S1,S2,..  a size band with its warm-up and iteration counts
              (repeatable; replaces the default bands)
  -T SEC      timeout of one benchmark command; default 900 (smoke 60)
  -C N        check results (-c 1) in the first N runs only; default 1
              (checking is outside the timing, and 256 MiB checks take long)
  --smoke     2 ranks, 2 sizes, 1 run, few iterations; skip missing peers
  --no-install  never apt-get install missing packages
EOF
}

while [ $# -gt 0 ]; do
  case "$1" in
    -B) BUILD=$2; shift 2 ;;
    -o) OUT=$2; shift 2 ;;
    -R) RUNS=$2; shift 2 ;;
    -p) NPS=$2; shift 2 ;;
    -c) COLLS=$2; shift 2 ;;
    -l) LIBS=$2; shift 2 ;;
    -S) [ "${SETBANDS:-}" ] || BANDS=(); SETBANDS=1; BANDS+=("$2"); shift 2 ;;
    -T) TMO=$2; shift 2 ;;
    -C) CHECKRUNS=$2; shift 2 ;;
    --smoke) SMOKE=1; shift ;;
    --no-install) INSTALL=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
if [ "$SMOKE" = 1 ]; then
  RUNS=1 NPS=2 INSTALL=0
  [ "${SETBANDS:-}" ] || BANDS=("1:3:64,64K")
fi
TMO=${TMO:-$([ "$SMOKE" = 1 ] && echo 60 || echo 900)}

BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "no build directory" >&2; exit 2; }
BENCH=$BUILD/benchmarks  # -B: the build tree, or the directory of the *_perf
[ -x "$BENCH/allreduce_perf" ] || BENCH=$BUILD
for c in $COLLS; do
  [ -x "$BENCH/${c}_perf" ] || { echo "missing $BENCH/${c}_perf (build coll first)" >&2; exit 2; }
done
mkdir -p "$OUT/raw" "$OUT/bin" && OUT=$(cd "$OUT" && pwd)
rm -f "$OUT"/raw/*.log
PY=/usr/bin/python3   # Debian's python3 (python3-torch); `python3` may be another

say() { echo "== $*"; }
# Keep freed memory in the peers' processes (see the rules above).
PEER_ENV=(MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736 MALLOC_ARENA_MAX=1)

# ---- packages ------------------------------------------------------------
declare -A PKGS=([ompi]="openmpi-bin libopenmpi-dev" [mpich]="mpich libmpich-dev"
                 [gloo]="libgloo-dev" [torch]="python3-torch" [plot]="gnuplot-nox")
have_pkg() { dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=()
for k in ompi mpich gloo torch plot; do
  for p in ${PKGS[$k]}; do have_pkg "$p" || missing+=("$p"); done
done
if [ ${#missing[@]} -gt 0 ] && [ "$INSTALL" = 1 ] && [ "$(id -u)" = 0 ]; then
  say "apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive timeout 1800 apt-get install -y --no-install-recommends \
    "${missing[@]}" >"$OUT/apt.log" 2>&1 || echo "apt-get failed (see $OUT/apt.log)"
fi
ENABLED=""
for lib in $LIBS; do
  ok=1
  if [ "$lib" != coll ]; then
    for p in ${PKGS[$lib]}; do have_pkg "$p" || { echo "skipped: $lib ($p not installed)"; ok=0; break; }; done
  fi
  [ $ok = 1 ] && ENABLED="$ENABLED $lib"
done

# ---- build the peers -----------------------------------------------------
CFLAGS="-O2 -Wall -Wextra"
fresh() {  # binary source: built after its sources changed last (kept between runs)
  [ "$1" -nt "$HERE/$2" ] && [ "$1" -nt "$HERE/peer_common.h" ]
}
links() {  # binary wanted unwanted: each MPI binary runs with its own library
  local l; l=$(ldd "$1") || return 1
  grep -q "$2" <<<"$l" && ! grep -q "$3" <<<"$l"
}
build_peer() {  # lib
  case "$1" in
    ompi) { fresh "$OUT/bin/mpi_perf.openmpi" mpi_perf.c ||
            mpicc.openmpi $CFLAGS -std=c11 -o "$OUT/bin/mpi_perf.openmpi" "$HERE/mpi_perf.c"; } &&
          links "$OUT/bin/mpi_perf.openmpi" "libmpi.so.40" "libmpich" ;;
    mpich) { fresh "$OUT/bin/mpi_perf.mpich" mpi_perf.c ||
             mpicc.mpich $CFLAGS -std=c11 -o "$OUT/bin/mpi_perf.mpich" "$HERE/mpi_perf.c"; } &&
           links "$OUT/bin/mpi_perf.mpich" "libmpich.so" "libmpi.so.40" ;;
    membw) fresh "$OUT/bin/membw" membw.c ||
           gcc $CFLAGS -std=c11 -pthread -o "$OUT/bin/membw" "$HERE/membw.c" ;;
    gloo) fresh "$OUT/bin/gloo_perf" gloo_perf.cc ||
          g++ $CFLAGS -std=c++17 -o "$OUT/bin/gloo_perf" "$HERE/gloo_perf.cc" -lgloo -pthread ;;
    torch) [ -x "$PY" ] ;;  # importing torch costs seconds: a broken one shows in its log
    *) true ;;
  esac
}
LIBSOK=""
for lib in $ENABLED; do
  if build_peer "$lib" >"$OUT/bin/$lib.build.log" 2>&1; then LIBSOK="$LIBSOK $lib"
  else echo "skipped: $lib (build or library check failed, see $OUT/bin/$lib.build.log)"; fi
done
say "libraries:$LIBSOK"
for b in "$OUT"/bin/mpi_perf.*; do [ -e "$b" ] && { echo "ldd $(basename "$b"):"; ldd "$b" | grep -E "libmpi|libmpich"; }; done

# ---- versions ------------------------------------------------------------
{
  echo "date: $(date -Is)"; echo "host: $(uname -srm), $(nproc) cpus, $(free -g | awk '/Mem/{print $2}') GiB"
  echo "coll: $(git -C "$HERE" describe --always --dirty 2>/dev/null)"
  for p in openmpi-bin mpich libgloo-dev python3-torch; do echo "$p: $(dpkg-query -W -f='${Version}' "$p" 2>/dev/null)"; done
} >"$OUT/versions.txt"

# ---- the command of one (library, collective, ranks) ---------------------
to_bytes() {  # 64K -> 65536
  local s=${1%B} m=1
  case "$s" in *K|*k) m=1024 ;; *M|*m) m=1048576 ;; *G|*g) m=1073741824 ;; esac
  s=${s%[KkMmGg]}; echo $((s * m))
}
peer_bands() { local b; for b in "${BANDS[@]}"; do printf ' -B %s' "$b"; done; }
# coll's benchmarks take -b/-e/-f: one command per geometric run of a band.
coll_cmds() {  # coll np check -> lines of arguments
  local band w n sizes i s f
  for band in "${BANDS[@]}"; do
    w=${band%%:*}; n=${band#*:}; n=${n%%:*}; IFS=, read -ra sizes <<<"${band#*:*:}"
    i=0
    while [ $i -lt ${#sizes[@]} ]; do
      local b0 e0 f0=2 j
      b0=$(to_bytes "${sizes[$i]}"); e0=$b0; j=$((i + 1))
      if [ $j -lt ${#sizes[@]} ]; then
        s=$(to_bytes "${sizes[$j]}")
        if [ $((s % e0)) = 0 ] && [ $((s / e0)) -ge 2 ]; then
          f0=$((s / e0)); f=$f0
          while [ $j -lt ${#sizes[@]} ] && [ "$(to_bytes "${sizes[$j]}")" = $((e0 * f)) ]; do
            e0=$((e0 * f)); j=$((j + 1))
          done
        fi
      fi
      echo "-np $2 -b $b0 -e $e0 -f $f0 -w $w -n $n -c $3 -a 3 -d float -o sum -y 1"
      i=$j
    done
  done
}
run_one() {  # lib colls np run: one log; peers run all collectives in one launch
  local lib=$1 colls=$2 np=$3 run=$4 rc=0 t0=$SECONDS cmd log check=1
  [ "$run" -gt "$CHECKRUNS" ] && check=0
  log="$OUT/raw/$lib.$([ "$lib" = coll ] && echo "$colls" || echo all).np$np.run$run.log"
  {
    echo "# lib $lib colls $colls np $np run $run"
    echo "# loadavg before: $(cut -d' ' -f1-3 /proc/loadavg)"
  } >"$log"
  local common=(timeout -k 10 "$TMO")
  if [ "$lib" = coll ]; then
    while read -r args; do
      cmd="$BENCH/${colls}_perf $args"
      echo "+ $cmd" | tee -a "$log"
      "${common[@]}" $cmd </dev/null >>"$log" 2>&1 || rc=$?
    done < <(coll_cmds "$colls" "$np" "$check")
  else
    case "$lib" in
      ompi) cmd="mpirun.openmpi --oversubscribe --allow-run-as-root --mca btl self,vader,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -np $np $OUT/bin/mpi_perf.openmpi" ;;
      mpich) cmd="mpiexec.mpich -launcher fork -iface lo -n $np $OUT/bin/mpi_perf.mpich" ;;
      gloo) cmd="$OUT/bin/gloo_perf -np $np" ;;
      torch) cmd="$PY $HERE/torch_perf.py -np $np" ;;
    esac
    cmd="$cmd -C ${colls// /,}$(peer_bands) -c $check -d float -o sum"
    echo "+ ${PEER_ENV[*]} $cmd" | tee -a "$log"
    env "${PEER_ENV[@]}" "${common[@]}" $cmd </dev/null >>"$log" 2>&1 || rc=$?
  fi
  {
    echo "# exit $rc after $((SECONDS - t0)) s"
    echo "# loadavg after: $(cut -d' ' -f1-3 /proc/loadavg)"
  } >>"$log"
  case $rc in
    0) ;;
    124|137) echo "   $lib np $np: TIMEOUT after ${TMO}s (rows done are kept)" ;;
    *) echo "   $lib np $np: exit $rc (see $log)" ;;
  esac
  [ "$lib" = coll ] && [ $rc != 0 ] && COLL_FAILED=1
  return 0
}

# ---- the memory limit, measured before and after the libraries --------------
rm -f "$OUT/membw.txt"
MEMSETS=8,16,32,64,128,256,512,1024,2048  # MiB: table.py bounds a cell at its node's data size
membw() {  # when
  if build_peer membw >"$OUT/bin/membw.build.log" 2>&1; then
    say "memory copy bandwidth ($1)"
    { echo "# membw $1, loadavg $(cut -d' ' -f1-3 /proc/loadavg)"; "$OUT/bin/membw" $([ "$SMOKE" = 1 ] && echo -r 1 -s 8 || echo -s "$MEMSETS"); } | tee -a "$OUT/membw.txt"
  else
    echo "skipped: memory bandwidth (see $OUT/bin/membw.build.log)"
  fi
}
membw before

# ---- run: interleaved repeats ---------------------------------------------
START=$SECONDS COLL_FAILED=0
for run in $(seq 1 "$RUNS"); do
  for np in $NPS; do
    for lib in $LIBSOK; do
      say "run $run/$RUNS np $np $lib"
      if [ "$lib" = coll ]; then
        for coll in $COLLS; do run_one coll "$coll" "$np" "$run"; done
      else
        run_one "$lib" "$COLLS" "$np" "$run"
      fi
    done
  done
done
say "benchmarks took $((SECONDS - START)) s"
membw after

# ---- table and plots -------------------------------------------------------
python3 "$HERE/table.py" "$OUT" --libs "$LIBSOK" --colls "$COLLS" --nps "$NPS" $([ "$SMOKE" = 1 ] && echo --smoke)
status=$?  # non-zero: a library that ran produced no rows at all
if command -v gnuplot >/dev/null; then
  for coll in $COLLS; do
    [ -e "$OUT/plot/$coll.plot" ] || continue
    gnuplot -e "outfile='$OUT/$coll.png'; coll='$coll'; plotfile='$OUT/plot/$coll.plot'" \
      "$HERE/plot.gp" 2>>"$OUT/plot/gnuplot.log" && echo "wrote $OUT/$coll.png"
  done
else
  echo "skipped: plots (gnuplot-nox not installed)"
fi
[ "$COLL_FAILED" = 0 ] || echo "coll failed (wrong results, error or timeout): see $OUT/raw/coll.*"
say "total $SECONDS s; results in $OUT"
[ "$COLL_FAILED" = 0 ] && [ $status = 0 ]
