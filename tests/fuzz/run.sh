#!/usr/bin/env bash
# Builds the libFuzzer targets with clang + ASan/UBSan and runs each for a
# bounded time on its corpus (tests/fuzz/corpus/<target>; new inputs found
# go to a scratch copy, not into the tree).
# Usage: tests/fuzz/run.sh [seconds per target] [build dir]
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-30}
dir=${2:-build-fuzz}
cmake -S . -B "$dir" -DCMAKE_C_COMPILER=clang -DCOLL_FUZZ=ON -DCOLL_WERROR=ON \
  -DCOLL_BUILD_BENCHMARKS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$dir" -j "$(nproc)" --target fuzz_bootstrap fuzz_tcp_frames
export COLL_SOCKET_IFNAME=lo
for t in bootstrap tcp_frames; do
  work=$(mktemp -d)
  cp -r "tests/fuzz/corpus/$t/." "$work/"
  echo "=== fuzz_$t for ${secs}s ==="
  "$dir/tests/fuzz/fuzz_$t" -max_total_time="$secs" -max_len=512 -timeout=10 -print_final_stats=1 \
    "$work" 2>&1 | grep -E 'stat::number_of_executed_units|ERROR|SUMMARY|Done' || true
  # fail on any crash: libFuzzer writes crash-*/leak-*/timeout-* files
  if ls crash-* leak-* timeout-* oom-* >/dev/null 2>&1; then
    echo "fuzz_$t found a failure:"; ls crash-* leak-* timeout-* oom-* 2>/dev/null; rm -rf "$work"; exit 1
  fi
  rm -rf "$work"
done
echo "fuzz: 2 passed, 0 failed"
