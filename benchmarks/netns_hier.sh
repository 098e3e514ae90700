#!/usr/bin/env bash
# netns_hier.sh - ring vs hierarchical all-reduce on emulated nodes: K network
# namespaces x M ranks (tests/integration/netns.sh), each node's link shaped
# to RATE, allreduce_perf once per algorithm (COLL_ALGO=allreduce:<algo>);
# prints every table and the busbw ratio <algo>/ring per size. Root only.
#
#   benchmarks/netns_hier.sh [-k 4] [-m 2] [-r 1gbit] [-a "ring hier"] [-R 1]
#                            [-U] [-t 900] [-B BUILD_DIR] [-- allreduce_perf args]
#
#   -k/-m/-r   nodes, ranks per node, link rate (tc syntax; "" = unshaped)
#   -a ALGOS   algorithms to compare; the first is the baseline (default "ring hier")
#   -R N       run each algorithm N times, alternating, and keep the best busbw
#              per size (the machine may be shared: best-of-N is the least noisy)
#   -U         also run the baseline unshaped, to show what the CPUs alone allow
#              (when that is not well above RATE the comparison is CPU-bound)
#   -t SEC     deadline of each run (default 900)
#   -B DIR     build directory holding benchmarks/allreduce_perf (default: the
#              repository's build/, or set ALLREDUCE_PERF=/path/to/allreduce_perf)
#   after --   allreduce_perf arguments (default: -b 1M -e 64M -f 4 -c 1 -n 5 -w 1)
#
# Exit status: 0 when the baseline ran (a missing or failing other algorithm is
# reported, not fatal), 1 otherwise, 77 when not root / no `ip netns`.
set -u -o pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
NETNS="$REPO/tests/integration/netns.sh"
K=4 M=2 RATE=1gbit ALGOS="ring hier" REPS=1 UNSHAPED=0 TIMEOUT=900 BUILD=""
while getopts ":k:m:r:a:R:Ut:B:h" opt; do
  case "$opt" in
    k) K=$OPTARG ;; m) M=$OPTARG ;; r) RATE=$OPTARG ;; a) ALGOS=$OPTARG ;;
    R) REPS=$OPTARG ;; U) UNSHAPED=1 ;; t) TIMEOUT=$OPTARG ;; B) BUILD=$OPTARG ;;
    h) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
    *) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
ARGS=("$@")
[ ${#ARGS[@]} -gt 0 ] || ARGS=(-b 1M -e 64M -f 4 -c 1 -n 5 -w 1)

if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
  echo "netns_hier.sh: SKIPPED: needs root and 'ip netns'" >&2
  exit 77
fi
PERF=${ALLREDUCE_PERF:-}
if [ -z "$PERF" ]; then
  for d in ${BUILD:+"$BUILD"} "$REPO/build"; do
    [ -x "$d/benchmarks/allreduce_perf" ] && { PERF="$d/benchmarks/allreduce_perf"; break; }
  done
fi
[ -n "$PERF" ] && [ -x "$PERF" ] || { echo "netns_hier.sh: allreduce_perf not found (-B BUILD_DIR or ALLREDUCE_PERF=...)" >&2; exit 1; }

OUT=$(mktemp -d /tmp/netns_hier.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
read -r -a ALGO <<<"$ALGOS"
BASE=${ALGO[0]}
RUNS=("${ALGO[@]}")
[ "$UNSHAPED" = 1 ] && RUNS+=("$BASE@unshaped")

echo "# netns_hier: $K nodes x $M ranks, node links ${RATE:-unshaped}, algorithms: ${RUNS[*]}, best of $REPS"
echo "# allreduce_perf ${ARGS[*]}"
echo "# $(nproc) CPU(s), load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%Y-%m-%d %H:%M UTC')"

# run NAME REP: one netns.sh run; rank 0's output without its prefix -> $OUT/NAME.REP
run() {
  local name=$1 rep=$2 algo=${1%@*} rate=$RATE
  [ "$name" != "$algo" ] && rate=""
  local t0=$SECONDS
  mkdir -p "$OUT/dbg.$name.$rep"
  COLL_ALGO="allreduce:$algo" COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=INIT COLL_DEBUG_FILE="$OUT/dbg.$name.$rep/%h.%p" \
    "$NETNS" -k "$K" -m "$M" ${rate:+-r "$rate"} -t "$TIMEOUT" -- \
    "$PERF" "${ARGS[@]}" >"$OUT/log.$name.$rep" 2>&1
  local rc=$?
  sed -n 's/^\[0\] //p' "$OUT/log.$name.$rep" >"$OUT/res.$name.$rep"
  local how
  how=$(cat "$OUT/dbg.$name.$rep"/* 2>/dev/null | grep -o 'rank 0/[0-9]* pid .*' | sed 's/ pid [0-9]* on [^:]*//' | head -1)
  echo "# run $((rep + 1))/$REPS $name: status $rc, $((SECONDS - t0)) s${how:+; $how}" >&2
  if [ $rc != 0 ]; then
    echo "# $name failed (status $rc):" >&2
    grep -vE '^\[[0-9]+\] #' "$OUT/log.$name.$rep" | grep -iE 'error|fail|no algorithm|timeout|killed|status' |
      sort -u | head -8 | sed 's/^/#   /' >&2
    rm -f "$OUT/res.$name.$rep"
  fi
  return $rc
}

for ((rep = 0; rep < REPS; rep++)); do
  # alternate the order so a change in machine load does not favour one side
  order=("${RUNS[@]}")
  if ((rep % 2)); then order=(); for ((i = ${#RUNS[@]} - 1; i >= 0; i--)); do order+=("${RUNS[i]}"); done; fi
  for name in "${order[@]}"; do
    [ -e "$OUT/$name.skip" ] && continue
    run "$name" "$rep" || {
      # an algorithm the library does not have yet: do not try it again
      grep -q "no algorithm" "$OUT/log.$name.$rep" && touch "$OUT/$name.skip"
    }
  done
done

# Best-of-REPS per run and size: size oop_time oop_busbw ip_time ip_busbw wrong.
# busbw is recomputed from the time (allreduce_perf prints 2 decimals only):
# 2 (n-1)/n * bytes / time, in GB/s.
NRANKS=0
IFS=',' read -r -a _per <<<"$M"
if [ ${#_per[@]} -gt 1 ]; then for m in "${_per[@]}"; do NRANKS=$((NRANKS + m)); done; else NRANKS=$((K * M)); fi
for name in "${RUNS[@]}"; do
  cat "$OUT/res.$name".* 2>/dev/null | awk -v n="$NRANKS" '
    $1 ~ /^[0-9]+$/ && NF >= 13 {
      s = $1; w = ($9 ~ /^[0-9]+$/ ? $9 : 0) + ($13 ~ /^[0-9]+$/ ? $13 : 0)
      if ($6 > 0 && (!(s in ot) || $6 < ot[s])) ot[s] = $6
      if ($10 > 0 && (!(s in it) || $10 < it[s])) it[s] = $10
      wr[s] += w; seen[s] = 1
    }
    END {
      f = n > 1 ? 2 * (n - 1) / n : 1
      for (s in seen) print s, ot[s], f * s / (ot[s] * 1e3), it[s], f * s / (it[s] * 1e3), wr[s]
    }' | sort -n >"$OUT/$name.best"
done

for name in "${RUNS[@]}"; do
  echo
  if [ ! -s "$OUT/$name.best" ]; then echo "## $name: no results"; continue; fi
  algo=${name%@*} links=${RATE:-unshaped}
  [ "$name" != "$algo" ] && links=unshaped
  echo "## COLL_ALGO=allreduce:$algo, node links $links"
  [ "$REPS" -gt 1 ] && echo "## (the last of $REPS runs; the summary below keeps the best per size)"
  last=$(ls "$OUT/res.$name".* 2>/dev/null | sort -t. -k3 -n | tail -1)
  grep -E '^#  +(size|\(B\))|^ +[0-9]|^# (Out of bounds|Avg bus)' "$last" 2>/dev/null
done

echo
echo "## busbw (GB/s, from the best time of $REPS run(s)) per size, out-of-place / in-place; ratio = <algo> / $BASE"
awk -v base="$BASE" -v names="${RUNS[*]}" -v dir="$OUT" '
  BEGIN {
    n = split(names, nm, " ")
    for (i = 1; i <= n; i++) {
      f = dir "/" nm[i] ".best"
      while ((getline line < f) > 0) {
        split(line, a, " "); sz[a[1]] = 1
        ob[nm[i], a[1]] = a[3]; ib[nm[i], a[1]] = a[5]; wr[nm[i], a[1]] = a[6]
      }
    }
    hdr = sprintf("%12s", "size(B)")
    for (i = 1; i <= n; i++) hdr = hdr sprintf("  %21s", nm[i] " oop/ip")
    for (i = 2; i <= n; i++) hdr = hdr sprintf("  %19s", nm[i] "/" base " oop/ip")
    print hdr
    m = 0; for (s in sz) keys[++m] = s + 0
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (keys[j] < keys[i]) { t = keys[i]; keys[i] = keys[j]; keys[j] = t }
    for (k = 1; k <= m; k++) {
      s = keys[k]; row = sprintf("%12d", s)
      for (i = 1; i <= n; i++)
        row = row (((nm[i], s) in ob) ? sprintf("  %9.3f / %9.3f%s", ob[nm[i], s], ib[nm[i], s], wr[nm[i], s] > 0 ? "!" : " ") : sprintf("  %21s", "-"))
      for (i = 2; i <= n; i++)
        if (((nm[i], s) in ob) && ((base, s) in ob) && ob[base, s] > 0 && ib[base, s] > 0)
          row = row sprintf("  %8.2fx / %7.2fx", ob[nm[i], s] / ob[base, s], ib[nm[i], s] / ib[base, s])
        else row = row sprintf("  %19s", "-")
      print row
    }
    print "(! = the run reported wrong results)"
  }'
[ -s "$OUT/$BASE.best" ]
