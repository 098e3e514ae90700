#!/usr/bin/env bash
# netns_selftest.sh - checks netns.sh itself: the environment every rank gets,
# failure propagation, the deadline, and that nothing is left behind after a
# normal run, a failure, a timeout, SIGINT and SIGTERM. Exits 77 (skipped)
# where netns.sh cannot run (not root, no `ip netns`).
set -u -o pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
NETNS="$HERE/netns.sh"
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
  echo "netns_selftest.sh: SKIPPED: needs root and 'ip netns'" >&2
  exit 77
fi

host_before=$(cat /proc/sys/kernel/hostname)
TMP=$(mktemp -d /tmp/netns_selftest.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
# The prefix (collnsNNNN) a netns.sh run printed in its banner.
prefix_of() { grep -o 'netns.sh: collns[0-9]\{4\}' "$1" | head -1 | sed 's/^netns.sh: //'; }
# Nothing of the runs with these prefixes may remain: no namespace, no link in
# the root namespace, no lock directory, no process of this test.
check_clean() {
  local what=$1 p
  shift
  [ $# -gt 0 ] && [ -n "$1" ] || { bad "$what: no collnsNNNN prefix in the output"; return; }
  leftovers() {
    for p in "$@"; do
      ip netns list | awk '{print $1}' | grep "^$p-"
      ip -o link show | awk -F': ' '{print $2}' | grep "^$p-"
      [ -e "/run/collns/$p" ] && echo "/run/collns/$p"
    done
    pgrep -af netns_selftest_marker
  }
  for _ in $(seq 1 20); do # namespace teardown is quick but asynchronous
    [ -z "$(leftovers "$@")" ] && break
    sleep 0.25
  done
  local left
  left=$(leftovers "$@")
  [ -z "$left" ] && ok "$what: nothing left behind ($*)" || bad "$what: left behind: $(echo $left)"
}

# 1. environment of every rank, uneven layout, shaping set up on both ends
"$NETNS" -m 1,2 -r 100mbit -t 30 -- sh -c \
  'echo "R=$RANK W=$WORLD_SIZE L=$LOCAL_RANK LW=$LOCAL_WORLD_SIZE N=$NODE_RANK H=$COLL_HOSTID I=$COLL_SOCKET_IFNAME M=$MASTER_ADDR:$MASTER_PORT HN=$(cat /proc/sys/kernel/hostname)"
   ip -o -4 addr show | grep -o "198\.18\.[0-9.]*/24"
   tc qdisc show | grep -c tbf' >"$TMP/1" 2>&1
rc=$?
out=$(cat "$TMP/1")
[ $rc = 0 ] && ok "env run exits 0" || bad "env run exited $rc: $out"
echo "$out" | grep -q '^\[0\] R=0 W=3 L=0 LW=1 N=0 H=node0 I==collns[0-9]*-v0 M=198.18.0.1:[0-9]' && ok "rank 0 env" || bad "rank 0 env: $out"
echo "$out" | grep -q '^\[2\] R=2 W=3 L=1 LW=2 N=1 H=node1 I==collns[0-9]*-v1 M=198.18.0.1:[0-9]* HN=node1$' && ok "rank 2 env" || bad "rank 2 env: $out"
[ "$(cat /proc/sys/kernel/hostname)" = "$host_before" ] && ok "host's hostname unchanged" || bad "hostname changed"
echo "$out" | grep -q '^\[1\] 198.18.0.2/24' && ok "node 1 address" || bad "node 1 address: $out"
echo "$out" | grep -q '^\[0\] 1$' && ok "node link shaped (tbf)" || bad "node link shaping: $out"
check_clean "normal run" "$(prefix_of "$TMP/1")"

# 2. a failing rank fails the run; the others are killed after the grace time
t0=$SECONDS
"$NETNS" -k 2 -m 2 -g 2 -t 60 -- sh -c '[ "$RANK" = 2 ] && exit 3; sleep 50; : netns_selftest_marker' >"$TMP/2" 2>&1
rc=$?
[ $rc = 3 ] && ok "failure propagates (status 3)" || bad "failure: status $rc, expected 3"
[ $((SECONDS - t0)) -lt 20 ] && ok "others killed after grace" || bad "failure run took $((SECONDS - t0))s"
check_clean "failed run" "$(prefix_of "$TMP/2")"

# 3. the deadline: everything is killed, status 124
t0=$SECONDS
"$NETNS" -k 2 -t 3 -- sh -c 'sleep 100; : netns_selftest_marker' >"$TMP/3" 2>&1
rc=$?
[ $rc = 124 ] && ok "timeout gives 124" || bad "timeout: status $rc, expected 124"
[ $((SECONDS - t0)) -lt 20 ] && ok "timeout bounded ($((SECONDS - t0))s)" || bad "timeout run took $((SECONDS - t0))s"
check_clean "timed-out run" "$(prefix_of "$TMP/3")"

# 4. SIGINT and SIGTERM to netns.sh mid-run
for sig in INT TERM; do
  # a background job starts with SIGINT ignored (and bash cannot trap an
  # ignored signal): restore it, as for a foreground run hit by Ctrl-C
  env --default-signal=INT "$NETNS" -k 3 -m 2 -t 60 -- sh -c 'sleep 100; : netns_selftest_marker' >"$TMP/4$sig" 2>&1 &
  pid=$!
  for _ in $(seq 1 50); do pgrep -f '^sh -c sleep 100; : netns_selftest_marker' >/dev/null && break; sleep 0.2; done
  kill -"$sig" $pid
  wait $pid
  rc=$?
  want=$([ $sig = INT ] && echo 130 || echo 143)
  [ $rc = "$want" ] && ok "SIG$sig: status $rc" || bad "SIG$sig: status $rc, expected $want"
  check_clean "SIG$sig" "$(prefix_of "$TMP/4$sig")"
done

# 5. a run killed with SIGKILL is cleaned up by the next run
"$NETNS" -k 2 -t 60 -- sh -c 'sleep 100; : netns_selftest_marker' >"$TMP/5a" 2>&1 &
pid=$!
for _ in $(seq 1 50); do pgrep -f '^sh -c sleep 100; : netns_selftest_marker' >/dev/null && break; sleep 0.2; done
{ kill -KILL $pid; wait $pid; } 2>/dev/null
[ -n "$(ip netns list | grep "^$(prefix_of "$TMP/5a")-")" ] && ok "SIGKILL leaves the namespaces (as expected)" ||
  bad "SIGKILL: namespaces of $(prefix_of "$TMP/5a") already gone?"
"$NETNS" -k 1 -t 20 -- true >"$TMP/5b" 2>&1
grep -q "removing leftovers of a dead run: $(prefix_of "$TMP/5a")" "$TMP/5b" && ok "next run reaps the dead run" ||
  bad "next run did not reap $(prefix_of "$TMP/5a"): $(cat "$TMP/5b")"
check_clean "SIGKILL + next run" "$(prefix_of "$TMP/5a")" "$(prefix_of "$TMP/5b")"

[ $fails = 0 ] && echo "netns_selftest: all passed" || echo "netns_selftest: $fails failed"
[ $fails = 0 ]
