#!/usr/bin/env bash
# Issue 17 point 3: table.py's coll/limit column. The bound is the least
# traffic per byte of size and rank (all-reduce 2; all-gather (n+1)/n, in
# place 1) at the copy rates membw measured for the largest working set not
# above the node's data or at a larger set (membw.txt: best of the
# before/after lines). Input: membw at 128, 256 and 512 MiB (512 MiB faster
# than 256: not monotonic), coll's all-reduce and all-gather on 2 ranks at
# 16 and 64 MiB. Checks the exact limits and fractions, and that 16 MiB (data
# below every measured set) has none; and that benchmarks/compare/limit.py
# (zerocopy_bench.sh's bound column) prints the same limits and the
# working sets membw must measure. Instant.
set -u -o pipefail
SRC=${2:?usage: $0 BUILD_DIR SOURCE_DIR}
. "$SRC/tests/fixtures/compare_rows.sh" # $T, row
cat >"$T/membw.txt" <<'M'
# membw before, loadavg 0.10 0.10 0.10
membw set_bytes 134217728 threads 1 copy_GBps 9.000
membw set_bytes 134217728 threads 2 copy_GBps 16.000
membw set_bytes 268435456 threads 1 copy_GBps 8.000
membw set_bytes 268435456 threads 2 copy_GBps 12.000
membw set_bytes 536870912 threads 1 copy_GBps 9.500
membw set_bytes 536870912 threads 2 copy_GBps 20.000
# membw after, loadavg 0.10 0.10 0.10
membw set_bytes 134217728 threads 1 copy_GBps 10.000
membw set_bytes 134217728 threads 2 copy_GBps 15.000
M
# 64 MiB all-reduce: out of place 3.00 GB/s busbw, in place 6.00
{ echo "# Collective test starting: allreduce_perf"; row 16777216 5000 5000; row 67108864 22369.62 11184.81; } >"$T/raw/coll.allreduce.np2.run1.log"
# 64 MiB all-gather: busbw = 0.5 x algbw; 2.40 GB/s out of place, 4.00 in place
{ echo "# Collective test starting: allgather_perf"; row 16777216 5000 5000; row 67108864 13981.01 8388.61; } >"$T/raw/coll.allgather.np2.run1.log"
FAILS=0
bad() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
python3 "$SRC/benchmarks/compare/table.py" "$T" --libs coll --colls "allreduce allgather" --nps 2 >"$T/t.md" ||
  bad "table.py failed: $(tail -3 "$T/t.md")"
want() { grep -qxF -- "$1" "$T/t.md" || bad "no line '$1' in: $(grep -F "${1%% |*} |" "$T/t.md" | tr '\n' '/')"; }
# all-reduce out of place: data 256 MiB -> rates max(8, 9.5) / max(12, 20):
# 2 x max(1/19, 2/40) s/GB -> 9.50 GB/s
want "| 64 MiB | 3.00 (22370) | – |  | 32% (9.50) |"
# in place: data 128 MiB -> 10 (the better of before and after) / 20: 2 x max(1/20, 2/40) -> 10.00
want "| 64 MiB | 6.00 (11185) | – |  | 60% (10.00) |"
# all-gather out of place: data 192 MiB -> from 128 MiB up, 10 / 20: 1.5 x 1/20 s/GB, busbw factor 0.5 -> 6.67
want "| 64 MiB | 2.40 (13981) | – |  | 36% (6.67) |"
# in place: traffic 1 -> 10.00
want "| 64 MiB | 4.00 (8389) | – |  | 40% (10.00) |"
# 16 MiB: node data 32..64 MiB, below every measured set: no limit
[ "$(grep -c '^| 16 MiB | .* |  |  |$' "$T/t.md")" = 4 ] || bad "16 MiB rows with a limit: $(grep '^| 16 MiB' "$T/t.md" | tr '\n' '/')"
grep -q 'copy GB/s 128 MiB: 10.00 / 16.00, 256 MiB: 8.00 / 12.00, 512 MiB: 9.50 / 20.00 (threads 1 / 2;' "$T/t.md" || bad "rates line: $(grep -o 'copy GB/s.\{0,80\}' "$T/t.md")"
# limit.py (zerocopy_bench.sh's bound): the same limits from the same membw.txt
L="$SRC/benchmarks/compare/limit.py"
[ "$(python3 "$L" bound "$T" allreduce 2 0 67108864)" = 9.50 ] || bad "limit.py bound allreduce oop: $(python3 "$L" bound "$T" allreduce 2 0 67108864 2>&1)"
[ "$(python3 "$L" bound "$T" allreduce 2 1 67108864)" = 10.00 ] || bad "limit.py bound allreduce ip: $(python3 "$L" bound "$T" allreduce 2 1 67108864 2>&1)"
[ "$(python3 "$L" bound "$T" allreduce 2 0 16777216)" = - ] || bad "limit.py bound at 16 MiB: $(python3 "$L" bound "$T" allreduce 2 0 16777216 2>&1)"
# reduce-scatter 4 ranks out of place: data 4 x (64 + 16) = 320 MiB -> rates from 256 MiB up, 9.5 / 20:
# 1.25 x max(1/19, 4/40) s/GB, busbw factor 0.75 -> 6.00
[ "$(python3 "$L" bound "$T" reducescatter 4 0 67108864)" = 6.00 ] || bad "limit.py bound reducescatter np 4: $(python3 "$L" bound "$T" reducescatter 4 0 67108864 2>&1)"
# the node's data of every cell at 64 MiB on 2 and 4 ranks (MiB)
[ "$(python3 "$L" sets 67108864 "2 4")" = 128,192,256,320,512 ] || bad "limit.py sets: $(python3 "$L" sets 67108864 "2 4" 2>&1)"
[ "$FAILS" = 0 ] && echo "all passed: limits 9.50 / 10.00 / 6.67 / 10.00 GB/s, limit.py 9.50 / 10.00 / - / 6.00"
exit $((FAILS > 0))
