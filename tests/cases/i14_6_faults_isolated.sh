#!/usr/bin/env bash
# issue 14 point 6: tests do not depend on what else runs on the machine.
# faults.many checks that 64 communicators leave nothing behind in
# /dev/shm; it counted every entry there, so another job's init (its mailbox
# segment, e.g. /dev/shm/coll-mbox-<hash>-<pid>) made it fail. Here a
# "concurrent job" creates such entries every 5 ms during the whole run (and
# removes them at the end); faults.many must still pass, 2 runs out of 2.
# Usage: i14_6_faults_isolated.sh BUILD_DIR SOURCE_DIR
set -u
build=$1
bin=$build/tests/integration/test_faults
[ -x "$bin" ] || { echo "missing $bin"; exit 1; }
[ -d /dev/shm ] && [ -w /dev/shm ] || { echo "no writable /dev/shm: skipped"; exit 77; }
tag="coll-mbox-i14x6-$$"
other=""
cleanup() {
  [ -n "$other" ] && kill "$other" 2>/dev/null && wait "$other" 2>/dev/null
  rm -f /dev/shm/"$tag"-* 2>/dev/null
}
trap cleanup EXIT INT TERM
# the other job: named after its own pid, like a real mailbox segment
( i=0; while :; do : > "/dev/shm/$tag-$i-$BASHPID"; i=$((i + 1)); sleep 0.005; done ) &
other=$!
fails=0
for run in 1 2; do
  before=$(ls /dev/shm | grep -c "^$tag-")
  if COLL_SOCKET_IFNAME=lo timeout 120 "$bin" many; then r=ok; else r=FAILED; fails=$((fails + 1)); fi
  after=$(ls /dev/shm | grep -c "^$tag-")
  echo "run $run: faults.many $r while the other job's entries went from $before to $after"
done
cleanup
other=""
trap - EXIT
[ "$(ls /dev/shm | grep -c "^$tag-")" = 0 ] || { echo "left entries behind"; exit 1; }
echo "i14_6_faults_isolated: $fails failed"
[ "$fails" = 0 ]
