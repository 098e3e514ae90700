#!/usr/bin/env bash
# obs_overhead.sh - what the always-on counters and flight recorder cost on
# the 8 B all-reduce, in instructions per call (valgrind --tool=callgrind),
# the build with them (-DCOLL_OBS=ON, the default) against one without
# (-DCOLL_OBS=OFF), side by side.
#
#   tools/obs_overhead.sh -a build -b build-noobs [-n 2000] [-y 1] [-p "1 2"] [-k]
#
# For each rank count of -p (default 1 and 2: one rank runs its schedule
# alone, two go through the shared-memory mailbox), each build runs
# `allreduce_perf -np P -b 8 -e 8 -c 0 -w 20 -n N` twice,
# with N and 3N iterations; the difference of the two runs' instruction
# counts over the difference of their calls (2 per iteration: out of place
# and in place) is the cost of one call, init and teardown cancelled. Waits
# are left out: they are counted apart (mbWaitAll, inclusive: the 8 B call
# goes through the mailbox), since how often a rank polls its peer before it
# is ready depends on scheduling, not on the code, and instructions run while
# waiting add no latency. COLL_SPIN_US=0 (unless set in the environment)
# makes every wait a futex sleep. -y 1: calls on the caller's thread (NULL stream);
# -y 0: through a stream and its progress thread. -k keeps the callgrind
# files (in the printed directory).
set -euo pipefail
on=build off=build-noobs iters=2000 ynull=1 keep=0 spin=${COLL_SPIN_US:-0} nps="1 2"
while getopts "a:b:n:y:p:k" c; do
  case $c in
    a) on=$OPTARG ;;
    b) off=$OPTARG ;;
    n) iters=$OPTARG ;;
    y) ynull=$OPTARG ;;
    p) nps=$OPTARG ;;
    k) keep=1 ;;
    *) sed -n 2,24p "$0" >&2; exit 2 ;;
  esac
done
command -v valgrind >/dev/null || { echo "obs_overhead: valgrind not found" >&2; exit 77; }
for b in "$on" "$off"; do
  [ -x "$b/benchmarks/allreduce_perf" ] || { echo "obs_overhead: no $b/benchmarks/allreduce_perf" >&2; exit 2; }
done
dir=$(mktemp -d /tmp/coll-obs-overhead.XXXXXX)
[ "$keep" = 1 ] || trap 'rm -rf "$dir"' EXIT
run() { # build tag iterations ranks
  mkdir -p "$dir/$2"
  COLL_SPIN_US=$spin valgrind --tool=callgrind --callgrind-out-file="$dir/$2/cg.%p" \
    "$1/benchmarks/allreduce_perf" -np "$4" -b 8 -e 8 -c 0 -w 20 -y "$ynull" -n "$3" >"$dir/$2.log" 2>&1 ||
    { echo "obs_overhead: $1 -np $4 -n $3 failed:" >&2; tail -20 "$dir/$2.log" >&2; exit 1; }
}
for np in $nps; do
run "$on" "np$np/on1" "$iters" "$np"
run "$on" "np$np/on3" $((3 * iters)) "$np"
run "$off" "np$np/off1" "$iters" "$np"
run "$off" "np$np/off3" $((3 * iters)) "$np"
echo "-np $np:"
python3 - "$dir/np$np" "$iters" "$np" <<'EOF'
import glob, os, re, subprocess, sys
d, n, np = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def ranks(tag):
    """(total, waits) of each rank process (the launcher's own file is the smallest)."""
    rows = []
    for f in glob.glob(os.path.join(d, tag, "cg.*")):
        out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", f],
                             capture_output=True, text=True, check=True).stdout
        tot = idle = 0
        for line in out.splitlines():
            m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*?)\s*(\[.*\])?$", line)
            if not m or m.group(2).startswith("=>"):
                continue
            v = int(m.group(1).replace(",", ""))
            if m.group(2) == "PROGRAM TOTALS": tot = v
            elif m.group(2).endswith(":mbWaitAll"): idle += v
        rows.append((tot, idle))
    rows.sort()
    return rows[-np:]
calls = 2 * (3 * n - n)
res = {}
for b in ("on", "off"):
    r1, r3 = ranks(b + "1"), ranks(b + "3")
    per = [((t3 - w3) - (t1 - w1)) / calls for (t1, w1), (t3, w3) in zip(r1, r3)]
    waits = [(w3 - w1) / calls for (t1, w1), (t3, w3) in zip(r1, r3)]
    res[b] = (sum(per) / len(per), sum(waits) / len(waits), per)
    print("  %-3s instructions per call, waits left out: %.1f (ranks: %s); in waits: %.1f"
          % (b, res[b][0], ", ".join("%.1f" % p for p in per), res[b][1]))
on, off = res["on"][0], res["off"][0]
print("  counters cost: %+.1f instructions per call = %+.2f %%" % (on - off, 100.0 * (on - off) / off))
EOF
done
