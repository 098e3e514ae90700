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
cmake --build "$dir" -j "$(nproc)" --target fuzz_bootstrap fuzz_bootstrap_reply fuzz_tcp_frames fuzz_shm_handshake \
  fuzz_ib_handshake
export COLL_SOCKET_IFNAME=lo
for t in bootstrap bootstrap_reply tcp_frames shm_handshake ib_handshake; do
  work=$(mktemp -d)
  cp -r "tests/fuzz/corpus/$t/." "$work/"
  echo "=== fuzz_$t for ${secs}s ==="
  rc=0
  "$dir/tests/fuzz/fuzz_$t" -max_total_time="$secs" -max_len=512 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$work/" "$work" > "$work.log" 2>&1 || rc=$?
  grep -E 'stat::number_of_executed_units|ERROR|SUMMARY|Done' "$work.log" || true
  if [ "$rc" -ne 0 ]; then
    echo "fuzz_$t failed (exit $rc); reproducer(s):"
    mkdir -p fuzz-artifacts && cp "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* fuzz-artifacts/ 2>/dev/null || true
    ls fuzz-artifacts; tail -40 "$work.log"; rm -rf "$work" "$work.log"; exit 1
  fi
  rm -f "$work.log"
  rm -rf "$work"
done
echo "fuzz: 5 passed, 0 failed"
