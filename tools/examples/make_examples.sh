#!/usr/bin/env bash
# make_examples.sh - the pictures in the README ("What coll did"): ring
# against hierarchical all-reduce of 4 MiB on 4 emulated nodes x 2 ranks,
# node links shaped to 1 Gbit/s (tests/integration/netns.sh), link capacity
# measured at init (COLL_TUNE_CALIBRATE=1). Per algorithm it writes the
# ranks' COLL_STATS_FILE and COLL_TRACE_FILE files, the report text, the
# heat map / utilisation / breakdown PNGs and a timeline PNG of one timed
# call. Root only (network namespaces).
#
#   tools/examples/make_examples.sh [-B BUILD_DIR] [-o OUT_DIR] [-r RATE]
#
# Default OUT_DIR: a temporary directory (printed); the README's copies live
# in tools/examples/ (ring_*.png, hier_*.png, *_report.txt).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=$REPO/build OUT="" RATE=1gbit
while getopts ":B:o:r:" opt; do
  case "$opt" in
    B) BUILD=$OPTARG ;; o) OUT=$OPTARG ;; r) RATE=$OPTARG ;;
    *) sed -n '2,13p' "$0" >&2; exit 2 ;;
  esac
done
[ -n "$OUT" ] || OUT=$(mktemp -d /tmp/coll_examples.XXXXXX)
REPORT=$REPO/tools/coll_report
for algo in ring hier; do
  d=$OUT/$algo
  rm -rf "$d" && mkdir -p "$d"
  echo "== $algo: 4 nodes x 2 ranks, links $RATE" >&2
  COLL_ALGO=allreduce:$algo COLL_TUNE_CALIBRATE=1 COLL_STATS_FILE=$d/stats.%r.json COLL_TRACE_FILE=$d/trace.%r.json \
    "$REPO/tests/integration/netns.sh" -k 4 -m 2 -r "$RATE" -t 600 -- \
    "$BUILD/benchmarks/allreduce_perf" -b 4M -e 4M -n 3 -w 1 -c 1 --show_algo 1 | sed -n 's/^\[0\] //p' > "$d/perf.txt"
  "$REPORT" stats --title "$algo, 4x2 nodes, $RATE" -o "$d" "$d"/stats.*.json > "$d/report.txt"
  # the timeline of the second timed 4 MiB call
  seq=$(/usr/bin/python3 -c '
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
big = [e["args"]["seq"] for e in ev if e.get("ph") == "B" and e.get("tid") == 0 and e["args"].get("bytes") == 4194304]
print(big[2] if len(big) > 2 else big[-1])' "$d/trace.0.json")
  "$REPORT" trace --check --title "$algo all-reduce of 4 MiB, 4x2 nodes, $RATE: collective #$seq" \
    --seq "$seq:$seq" --png "$d/timeline.png" -o "$d/trace.json" "$d"/trace.*.json >&2
done
echo "$OUT"
