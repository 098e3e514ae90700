#!/usr/bin/env bash
# BR-28, correctness part (pytorch/gloo#158: a latency cliff of Gloo's ring
# all-reduce between 64 KiB and 256 KiB). The latency rule itself is a
# benchmark, benchmarks/cliff_check.sh (timings do not belong in tests on a
# shared machine); this checks what it measures: all-reduce float32 sum at
# every size from 1 KiB to 4 MiB, doubling, out of place and in place, on 2
# and 4 ranks, over shared memory and over TCP loopback (COLL_SHM_DISABLE=1),
# with exact results and untouched guard bytes (allreduce_perf -c 1), and
# that cliff_check.sh runs and parses (--smoke).
# Usage: br28_sizes_correct.sh BUILD_DIR SOURCE_DIR
set -u
B=${1:?build dir} S=${2:?source dir}
BIN="$B/benchmarks/allreduce_perf"
[ -x "$BIN" ] || { echo "no $BIN"; exit 1; }
out=$(mktemp /tmp/coll-br28.XXXXXX)
trap 'rm -f "$out"' EXIT
fail=0
for np in 2 4; do
  for tr in shm tcp; do
    off=0
    [ "$tr" = tcp ] && off=1
    if ! COLL_SHM_DISABLE=$off COLL_TIMEOUT=60 timeout 240 "$BIN" -np "$np" -b 1K -e 4M -f 2 -d float -o sum \
        -n 1 -w 1 -c 1 >"$out" 2>&1; then
      echo "FAIL: allreduce_perf -np $np over $tr exited with an error:"
      tail -20 "$out"
      fail=1
      continue
    fi
    # 13 columns per size; #wrong (9th, 13th) must be 0 at all 13 sizes
    rows=$(awk '!/^#/ && NF >= 13' "$out" | wc -l)
    bad=$(awk '!/^#/ && NF >= 13 && ($9 != 0 || $13 != 0)' "$out")
    if [ "$rows" -ne 13 ] || [ -n "$bad" ]; then
      echo "FAIL: $np ranks over $tr: $rows sizes reported (expected 13), wrong results:"
      echo "$bad"
      fail=1
    else
      echo "ok: $np ranks over $tr: 13 sizes from 1 KiB to 4 MiB exact"
    fi
  done
done
if ! bash "$S/benchmarks/cliff_check.sh" --smoke -B "$B" >"$out" 2>&1; then
  echo "FAIL: benchmarks/cliff_check.sh --smoke:"
  cat "$out"
  fail=1
else
  echo "ok: cliff_check.sh --smoke ran ($(grep -c '^| [0-9]' "$out") table rows)"
fi
exit $fail
