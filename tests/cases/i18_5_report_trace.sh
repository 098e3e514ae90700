#!/usr/bin/env bash
# i18_5_report_trace.sh - issue 18, tests: the files the ranks write and the
# report tool. (1) COLL_TRACE_FILE of a 3-rank run (mailbox calls, schedules,
# send/recv): every file parses, every span that begins
# ends on its track (tools/coll_report trace --check), there is one
# operation span per call and transfer spans with bytes and peers, and the
# merged file parses. (2) The heat map, utilisation and breakdown PNGs
# render from the COLL_STATS_FILE files of 2 ranks (processes) and of 64
# ranks (threads, loopback transport), and the text names every rank.
# Before issue 18 neither file nor tool existed.
set -euo pipefail
BUILD=$1 SRC=$2
REPORT=$SRC/tools/coll_report
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no matplotlib (Debian: python3-matplotlib)"; exit 77
fi
T=$(mktemp -d /tmp/coll_i18_5.XXXXXX)
trap 'rm -rf "$T"' EXIT
export COLL_TIMEOUT=60 COLL_TESTS_LAUNCH_TIMEOUT=100

# (1) timeline
COLL_TRACE_FILE=$T/trace.%r.json COLL_STATS_FILE=$T/stats.%r.json \
  "$BUILD/benchmarks/allreduce_perf" -np 3 -b 8 -e 4M -f 32 -n 2 -w 1 -c 1 > "$T/ar.out"
COLL_TRACE_FILE=$T/p2p.%r.json "$BUILD/benchmarks/sendrecv_perf" -np 2 -b 1K -e 1M -f 32 -n 2 -w 0 -c 1 > "$T/sr.out"
"$REPORT" trace --check -o "$T/merged.json" "$T"/trace.*.json | tee "$T/check.out"
grep -q ', 0 error(s)$' "$T/check.out"
"$REPORT" trace --check "$T"/p2p.*.json | grep -q ', 0 error(s)$'
/usr/bin/python3 - "$T" <<'PY'
import json, sys, glob
T = sys.argv[1]
for path in sorted(glob.glob(T + "/trace.*.json")):
    d = json.load(open(path))
    st = json.load(open(path.replace("trace.", "stats.")))
    ev = d["traceEvents"]
    ops = [e for e in ev if e["ph"] == "B" and e["tid"] == 0]
    steps = [e for e in ev if e["ph"] == "B" and e["tid"] != 0]
    assert len(ops) == st["ops"], (path, len(ops), st["ops"])
    assert all("algo" in e["args"] and "bytes" in e["args"] for e in ops), path
    assert steps and all(e["args"]["bytes"] >= 0 and 0 <= e["args"]["peer"] < 3 for e in steps), path
    sent = sum(e["args"]["bytes"] for e in steps if e["name"].startswith("send"))
    schedule = sum(p["bytesSent"] - p["mailboxBytes"] for p in st["peers"])
    assert sent == schedule, (path, sent, schedule)
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "calls" in names and "ch 0" in names, names
    print(f"{path}: {len(ops)} operation spans, {len(steps)} transfer spans, {sent} bytes sent = the counters")
json.load(open(T + "/merged.json"))
for path in sorted(glob.glob(T + "/p2p.*.json")):
    ev = json.load(open(path))["traceEvents"]
    assert any(e["ph"] == "B" and e["name"].startswith("send/recv") for e in ev), path
PY

# (2) pictures, 2 and 64 ranks
rm -f "$T"/stats.*.json
COLL_STATS_FILE=$T/stats.%r.json "$BUILD/benchmarks/allreduce_perf" -np 2 -b 8 -e 1M -f 32 -n 2 -w 0 -c 1 > /dev/null
"$REPORT" stats -o "$T/png2" "$T"/stats.*.json > "$T/r2.out"
mkdir "$T/s64"
COLL_NET=loopback COLL_STATS_FILE=$T/s64/stats.%r.json \
  "$BUILD/benchmarks/allreduce_perf" -t 64 -b 1K -e 64K -f 8 -n 2 -w 0 -c 0 > /dev/null
"$REPORT" stats -o "$T/png64" "$T"/s64/stats.*.json > "$T/r64.out"
for d in png2 png64; do
  for f in heatmap utilisation breakdown; do
    /usr/bin/python3 -c "import sys, matplotlib.image as m; a = m.imread(sys.argv[1]); assert a.shape[0] > 300 and a.shape[1] > 400 and a.std() > 0.01" "$T/$d/$f.png"
  done
done
grep -q '^ranks 2 on 1 node(s); files from 2 rank(s)$' "$T/r2.out"
grep -q '^ranks 64 on 1 node(s); files from 64 rank(s)$' "$T/r64.out"
[ "$(grep -c '^ *[0-9]*: ' "$T/r64.out")" -ge 64 ]
echo "PASS: traces balanced, heat maps for 2 and 64 ranks"
