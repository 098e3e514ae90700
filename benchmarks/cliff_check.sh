#!/usr/bin/env bash
# cliff_check.sh - BR-28's latency rule (pytorch/gloo#158: Gloo's ring
# all-reduce latency jumped 7x, then 19x per doubling between 64 KiB and
# 256 KiB). All-reduce float32 sum from 1 KiB to 4 MiB, doubling, on one
# host, over shared memory and over TCP loopback (COLL_SHM_DISABLE=1), side
# by side: each round runs every rank count over shm, then over TCP, so both
# transports see the same machine load. Every sample is one timed call after
# a barrier (allreduce_perf -n 1 -N CYCLES); the results of every size are
# checked (-c 1) on the first cycle of each run, out of place and in place.
# Rules (the thresholds are the case's, not the report's), per rank count:
#   no cliff:   median(2s) <= 3 * median(s) + 50 us for every doubling s -> 2s,
#               on each transport;
#   shm vs tcp: median over shm <= median over TCP for every size >= 64 KiB.
# Prints one table per rank count (median us and busbw of each transport,
# the cliff ratio median(2s) / (3 median(s) + 50 us), ok/FAIL) and the load
# average before and after: the rule is about coll, the numbers about the
# machine at that moment. Exit status: 0 all rules hold and every result was
# right, 1 a rule failed, 2 a run failed or gave wrong results.
#
#   benchmarks/cliff_check.sh [-np "2 4"] [-R 4] [-N 50] [-w 20] [-b 1K] [-e 4M]
#       [-B BUILD_DIR] [-o FILE] [--smoke]
#
#   -np LIST   rank counts (default "2 4")
#   -R ROUNDS  rounds (default 4); samples per size = ROUNDS * CYCLES
#   -N CYCLES  cycles per run (default 50: 200 samples per size)
#   -w WARMUP  untimed calls before each sample (default 20 on the first
#              cycle of a run, 2 on the others)
#   -b/-e      smallest and largest size (default 1K and 4M)
#   -B DIR     build directory holding benchmarks/allreduce_perf (default build)
#   -o FILE    also write the report to FILE
#   --smoke    2 ranks, 1 round of 3 cycles, 1K..256K: checks the script and
#              the results, reports the rules but always exits 0 unless a run
#              failed (seconds; for CI)
set -u
usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit "${1:-2}"; }

NPS="2 4" ROUNDS=4 CYCLES=50 WARM=20 MINB=1K MAXB=4M BUILD=build OUTFILE="" SMOKE=0
while [ $# -gt 0 ]; do
  case "$1" in
    -np) NPS=$2; shift 2 ;;
    -R) ROUNDS=$2; shift 2 ;;
    -N) CYCLES=$2; shift 2 ;;
    -w) WARM=$2; shift 2 ;;
    -b) MINB=$2; shift 2 ;;
    -e) MAXB=$2; shift 2 ;;
    -B) BUILD=$2; shift 2 ;;
    -o) OUTFILE=$2; shift 2 ;;
    --smoke) SMOKE=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "cliff_check.sh: unknown argument $1" >&2; usage 2 ;;
  esac
done
if [ "$SMOKE" = 1 ]; then NPS=2 ROUNDS=1 CYCLES=3 WARM=2 MAXB=256K; fi
BIN="$BUILD/benchmarks/allreduce_perf"
[ -x "$BIN" ] || { echo "cliff_check.sh: $BIN not found (build first, or -B DIR)" >&2; exit 2; }

WORK=$(mktemp -d /tmp/coll-cliff.XXXXXX)
trap 'rm -rf "$WORK"' EXIT INT TERM
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
T0=$(date +%s)
failed=0
# One run: every size, CYCLES samples each, appended to $WORK/<np>.<transport>.
# The first cycle warms up with WARM calls and checks the results; the -N
# cycles after it warm up with 2 calls and do not check (allreduce_perf has
# one -w and one -c for all cycles, so the first cycle is a run of its own).
runOne() {
  local np=$1 tr=$2 shmoff=0
  [ "$tr" = tcp ] && shmoff=1
  for spec in "1 $WARM 1" "$((CYCLES - 1)) 2 0"; do
    set -- $spec
    [ "$1" -gt 0 ] || continue
    if ! COLL_SHM_DISABLE=$shmoff timeout 900 "$BIN" -np "$np" -b "$MINB" -e "$MAXB" -f 2 -d float -o sum \
        -n 1 -w "$2" -N "$1" -c "$3" >"$WORK/out" 2>"$WORK/err"; then
      echo "cliff_check.sh: allreduce_perf -np $np over $tr failed:" >&2
      tail -5 "$WORK/err" "$WORK/out" >&2
      failed=1
    fi
    grep -v '^#' "$WORK/out" | awk 'NF >= 13' >>"$WORK/$np.$tr"
  done
}
for ((r = 0; r < ROUNDS; r++)); do
  for np in $NPS; do
    runOne "$np" shm
    runOne "$np" tcp
  done
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$WORK" "$SMOKE" "$LOAD0" "$LOAD1" "$(( $(date +%s) - T0 ))" "$ROUNDS" "$CYCLES" $NPS <<'PY' | tee "$WORK/report"
import statistics, sys
work, smoke, load0, load1, secs, rounds, cycles = sys.argv[1:8]
nps = sys.argv[8:]
status = 0
print(f"# BR-28 latency rule: all-reduce float32 sum, {rounds} rounds x {cycles} samples per size, "
      f"shm and TCP side by side, {secs} s")
print(f"# load average before: {load0}, after: {load1} (shared machine: other jobs load the cores)")
for np in nps:
    data = {}
    for tr in ("shm", "tcp"):
        rows = {}
        try:
            lines = open(f"{work}/{np}.{tr}").read().split("\n")
        except OSError:
            lines = []
        for ln in lines:
            f = ln.split()
            if len(f) < 13:
                continue
            size = int(f[0])
            e = rows.setdefault(size, {"t": [], "wrong": 0})
            e["t"].append(float(f[5]))
            for w in (f[8], f[12]):
                if w != "N/A" and float(w) != 0:
                    e["wrong"] += 1
        data[tr] = rows
    sizes = sorted(set(data["shm"]) | set(data["tcp"]))
    n = int(np)
    print(f"\n## {np} ranks\n")
    print("| size | shm median us | shm busbw GB/s | tcp median us | tcp busbw GB/s | shm cliff | tcp cliff | shm <= tcp |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    prev = {}
    for s in sizes:
        cells = [f"{s}"]
        med = {}
        for tr in ("shm", "tcp"):
            e = data[tr].get(s)
            if not e or not e["t"]:
                cells += ["-", "-"]
                status = max(status, 2)
                continue
            if e["wrong"]:
                print(f"WRONG RESULTS: {np} ranks, {tr}, {s} bytes, {e['wrong']} samples", file=sys.stderr)
                status = 2
            m = statistics.median(e["t"])
            med[tr] = m
            busbw = s / (m * 1e-6) / 1e9 * 2 * (n - 1) / n if m > 0 else 0
            cells += [f"{m:.1f}", f"{busbw:.2f}"]
        for tr in ("shm", "tcp"):
            if tr in med and tr in prev:
                ratio = med[tr] / (3 * prev[tr] + 50)
                ok = ratio <= 1
                if not ok:
                    status = max(status, 1)
                cells.append(f"{ratio:.2f} {'ok' if ok else 'FAIL'}")
            else:
                cells.append("-")
        if s >= 65536 and "shm" in med and "tcp" in med:
            ok = med["shm"] <= med["tcp"]
            if not ok:
                status = max(status, 1)
            cells.append("ok" if ok else "FAIL")
        else:
            cells.append("-")
        prev = med
        print("| " + " | ".join(cells) + " |")
print()
verdict = {0: "every rule holds", 1: "a rule FAILED", 2: "a run failed or gave wrong results"}[status]
print(f"# result: {verdict}")
if smoke == "1" and status == 1:
    status = 0  # smoke: timings from 3 samples are not a verdict
sys.exit(status)
PY
rc=${PIPESTATUS[0]}
[ -n "$OUTFILE" ] && cp "$WORK/report" "$OUTFILE"
[ "$failed" = 1 ] && rc=2
exit "$rc"
