#!/usr/bin/env bash
# New-user report: `allreduce_perf -np N` killed the surviving rank processes
# the moment one died, so coll's own error on the survivors (which names the
# dead rank and its pid) was never printed. Now the launcher gives them
# GRACE_SEC (5 s) to report before it kills them.
# Recipe: allreduce_perf -np 3 over shared memory, SIGKILL the last rank
# process once the 4 MiB row is printed (during the larger sizes, where the
# old launcher's kill came before the survivors' own report). Expected: rc != 0 within 20 s; the
# launcher names the killed process; at least one survivor prints its own
# error naming that rank as exited, with its pid; no rank process is left.
# Usage: nu05_perf_child_death.sh BUILD_DIR SOURCE_DIR
set -u
B=${1:?build dir}
BIN="$B/benchmarks/allreduce_perf"
[ -x "$BIN" ] || { echo "no $BIN"; exit 1; }
out=$(mktemp /tmp/coll-nu05.XXXXXX)
trap 'rm -f "$out"' EXIT
COLL_TIMEOUT=60 "$BIN" -np 3 -b 1M -e 64M -f 2 -n 200 -w 1 -c 0 >"$out" 2>&1 &
parent=$!
victim=""
for _ in $(seq 1 600); do       # up to 60 s for init on a loaded machine
  if awk '!/^#/ && NF >= 13 && $1 == 4194304' "$out" | grep -q .; then break; fi
  sleep 0.1
done
# the children are forked in rank order: the newest is rank process 2
victim=$(pgrep -n -P "$parent")
if [ -z "$victim" ]; then
  echo "FAIL: no rank process of allreduce_perf (pid $parent) found"; cat "$out"; kill -9 "$parent" 2>/dev/null
  exit 1
fi
t0=$(date +%s.%N)
kill -9 "$victim"
for _ in $(seq 1 200); do kill -0 "$parent" 2>/dev/null || break; sleep 0.1; done
t1=$(date +%s.%N)
fail=0
if kill -0 "$parent" 2>/dev/null; then
  echo "FAIL: allreduce_perf still running 20 s after a rank process was killed"; fail=1
  pkill -9 -P "$parent"; kill -9 "$parent"
fi
wait "$parent"; rc=$?
left=$(pgrep -P "$parent" | wc -l)
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
echo "rc $rc after $secs s; output:"; grep -v '^#' "$out" | grep -v '^ *[0-9]' | head -8
[ "$rc" -ne 0 ] || { echo "FAIL: rc 0 after a rank process was killed"; fail=1; }
grep -q "rank process 2 (pid $victim) killed by signal 9" "$out" ||
  { echo "FAIL: the launcher did not name rank process 2 (pid $victim)"; fail=1; }
grep -Eq "coll-tests: rank [01]: .*rank 2 \(pid $victim on [^)]*\) has exited" "$out" ||
  { echo "FAIL: no survivor printed its own error naming rank 2 (pid $victim) as exited"; fail=1; }
[ "$left" -eq 0 ] || { echo "FAIL: $left rank processes left"; fail=1; }
[ $fail -eq 0 ] && echo "ok: survivors reported rank 2's exit themselves; rc $rc in $secs s"
exit $fail
