#!/usr/bin/env bash
# netns.sh - emulate K nodes on this machine with network namespaces and run
# one command per rank in them, like a tiny mpirun/torchrun.
#
#   netns.sh [-k NODES] [-m RANKS_PER_NODE | -m N0,N1,...] [-r RATE] [-q tbf|htb]
#            [-t TIMEOUT_S] [-g GRACE_S] [-v] -- COMMAND [ARGS...]
#
#   -k NODES   number of nodes (namespaces), default 2 (or the length of -m's list)
#   -m M       ranks per node (default 1), or a comma list of ranks per node (1,3,2)
#   -r RATE    shape each node's link to RATE (tc syntax: 1gbit, 500mbit), both
#              directions (egress of both veth ends); default: unshaped
#   -q QDISC   tbf (default) or htb for -r
#   -t SEC     whole-run deadline (default 300); on expiry every rank is killed
#              and the exit status is 124
#   -g SEC     after a rank fails, how long the others may take (default 15)
#   -v         print the topology and commands as they are set up
#
# Topology: namespace <P>-br holds bridge <P>-br; node i is namespace <P>-n<i>
# with veth <P>-v<i> (address 198.18.0.<i+1>/24, inside 198.18.0.0/15) whose
# peer <P>-b<i> is a port of the bridge. Both veth ends are created inside
# their namespaces, so the root namespace never sees a new interface. P is
# collns<NNNN> with NNNN = $$ % 10000 (the next free number if taken).
#
# Every rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK,
# MASTER_ADDR (node 0's address), MASTER_PORT (free in node 0's fresh
# namespace; coll's rendezvous is MASTER_PORT+1), COLL_HOSTID=node<i>,
# COLL_SOCKET_IFNAME==<P>-v<i>, COLL_TIMEOUT (= -t unless already set) and
# COLL_NETNS_NODE=<i>; its hostname is node<i> (a UTS namespace per rank).
# Ranks are numbered node by node. Every output line of a rank is prefixed
# with "[R] ".
#
# Exit status: 0 when every rank exits 0; the first failing rank's status
# otherwise (124 on timeout); 77 when this cannot run here (not root, no
# `ip netns`); 2 on usage errors. Namespaces, veths and the bridge are always
# removed (EXIT/INT/TERM/HUP traps); a run killed with SIGKILL is cleaned up
# by the next run (lock directory /run/collns/<P> holds the owner pid).
set -u -o pipefail

SKIP=77
NODES=""
RANKS="1"
RATE=""
QDISC="tbf"
TIMEOUT=300
GRACE=15
VERBOSE=0
LOCKROOT=/run/collns

usage() { # the comment block at the top of this file
  awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0" >&2
  exit "${1:-2}"
}
say() { [ "$VERBOSE" = 1 ] && echo "netns.sh: $*" >&2; return 0; }
die() { echo "netns.sh: $*" >&2; exit "${2:-1}"; }

while getopts ":k:m:r:q:t:g:vh" opt; do
  case "$opt" in
    k) NODES=$OPTARG ;;
    m) RANKS=$OPTARG ;;
    r) RATE=$OPTARG ;;
    q) QDISC=$OPTARG ;;
    t) TIMEOUT=$OPTARG ;;
    g) GRACE=$OPTARG ;;
    v) VERBOSE=1 ;;
    h) usage 0 ;;
    *) echo "netns.sh: bad option -$OPTARG" >&2; usage ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
[ $# -ge 1 ] || { echo "netns.sh: no COMMAND given" >&2; usage; }

# ---- checks: skip (77) when this machine cannot do it ------------------------
if [ "$(id -u)" != 0 ]; then
  echo "netns.sh: SKIPPED: needs root (network namespaces, veth, bridge, tc)" >&2
  exit $SKIP
fi
command -v ip >/dev/null 2>&1 || { echo "netns.sh: SKIPPED: iproute2 'ip' not found" >&2; exit $SKIP; }
if ! ip netns list >/dev/null 2>&1; then
  echo "netns.sh: SKIPPED: 'ip netns' is not available" >&2
  exit $SKIP
fi
if [ -n "$RATE" ] && ! command -v tc >/dev/null 2>&1; then
  echo "netns.sh: SKIPPED: -r needs tc (iproute2)" >&2
  exit $SKIP
fi

# ---- layout -----------------------------------------------------------------
isnum() { [[ "$1" =~ ^[0-9]+$ ]]; }
declare -a PER=()
IFS=',' read -r -a PER <<<"$RANKS"
for m in "${PER[@]}"; do isnum "$m" && [ "$m" -ge 1 ] || die "-m $RANKS: expected N or N0,N1,... (each >= 1)" 2; done
if [ "${#PER[@]}" -gt 1 ]; then
  [ -z "$NODES" ] || [ "$NODES" = "${#PER[@]}" ] || die "-k $NODES disagrees with -m $RANKS (${#PER[@]} nodes)" 2
  NODES=${#PER[@]}
else
  NODES=${NODES:-2}
  isnum "$NODES" && [ "$NODES" -ge 1 ] && [ "$NODES" -le 64 ] || die "-k $NODES: expected 1..64" 2
  m=${PER[0]}
  PER=()
  for ((i = 0; i < NODES; i++)); do PER+=("$m"); done
fi
[ "$NODES" -le 64 ] || die "at most 64 nodes" 2
isnum "$TIMEOUT" && [ "$TIMEOUT" -ge 1 ] || die "-t $TIMEOUT: expected seconds >= 1" 2
isnum "$GRACE" || die "-g $GRACE: expected seconds" 2
case "$QDISC" in tbf | htb) ;; *) die "-q $QDISC: expected tbf or htb" 2 ;; esac
WORLD=0
for m in "${PER[@]}"; do WORLD=$((WORLD + m)); done

# ---- prefix and lock --------------------------------------------------------
mkdir -p "$LOCKROOT" || die "cannot create $LOCKROOT"

# Removes what prefix $1 created: kills the processes in its namespaces, then
# deletes the namespaces (which destroys the veths and the bridge).
teardown_prefix() {
  local p=$1 ns pids
  local -a mine=()
  mapfile -t mine < <(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${p}-(br|n[0-9]+)$")
  for sig in TERM KILL; do
    pids=""
    for ns in "${mine[@]}"; do pids+=" $(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"; done
    pids=$(echo $pids)
    [ -z "$pids" ] && break
    say "kill -$sig $pids"
    kill -"$sig" $pids 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      local alive=""
      for q in $pids; do kill -0 "$q" 2>/dev/null && alive=1; done
      [ -z "$alive" ] && break
      sleep 0.2
    done
  done
  for ns in "${mine[@]}"; do ip netns del "$ns" 2>/dev/null || echo "netns.sh: warning: cannot delete netns $ns" >&2; done
  # Nothing should be in the root namespace; remove any stray link anyway.
  local l
  for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^${p}-" || true); do
    ip link del "$l" 2>/dev/null
  done
}

# Leftovers of runs that were SIGKILLed: lock dir whose owner is gone.
for d in "$LOCKROOT"/collns[0-9][0-9][0-9][0-9]; do
  [ -d "$d" ] || continue
  owner=$(cat "$d/pid" 2>/dev/null || true)
  if [ -n "$owner" ] && kill -0 "$owner" 2>/dev/null; then continue; fi
  # a run that just made its lock dir has not written the pid yet: give it time
  if [ -z "$owner" ] && [ -n "$(find "$d" -maxdepth 0 -newermt '-10 seconds' 2>/dev/null)" ]; then continue; fi
  echo "netns.sh: removing leftovers of a dead run: $(basename "$d")" >&2
  teardown_prefix "$(basename "$d")"
  rm -rf "$d"
done

P=""
base=$(($$ % 10000))
for ((try = 0; try < 100; try++)); do
  cand=$(printf 'collns%04d' $(((base + try) % 10000)))
  mkdir -p "$LOCKROOT" 2>/dev/null # again: a run that just ended may have removed it
  if mkdir "$LOCKROOT/$cand" 2>/dev/null; then
    if ip netns list | awk '{print $1}' | grep -q "^${cand}-"; then rmdir "$LOCKROOT/$cand"; continue; fi
    P=$cand
    echo $$ >"$LOCKROOT/$P/pid"
    break
  fi
done
[ -n "$P" ] || die "no free collnsNNNN prefix"

declare -a RPIDS=()     # pid of each rank's wrapper subshell
declare -a RSTATUS=()   # exit status once reaped
CLEANED=0
cleanup() {
  [ "$CLEANED" = 1 ] && return
  CLEANED=1
  trap '' INT TERM HUP
  teardown_prefix "$P"
  # the wrappers end once their rank has gone; do not leave them behind
  for p in "${RPIDS[@]}"; do kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "${LOCKROOT:?}/$P"
  rmdir "$LOCKROOT" 2>/dev/null # only when no other run holds a lock
  local left
  left=$(ip netns list | awk '{print $1}' | grep -c "^${P}-")
  [ "$left" = 0 ] || echo "netns.sh: warning: $left namespace(s) of $P still listed" >&2
}
trap cleanup EXIT
trap 'echo "netns.sh: interrupted; cleaning up" >&2; exit 130' INT
trap 'echo "netns.sh: terminated; cleaning up" >&2; exit 143' TERM
trap 'exit 129' HUP

# ---- network ----------------------------------------------------------------
BR="${P}-br"
run() { say "$*"; "$@" || die "failed: $*"; }
quiet_sysctls() { # no IPv6 chatter, no rp_filter surprises; best effort
  ip netns exec "$1" sh -c 'sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1' \
    >/dev/null 2>&1 || true
}
shape() { # shape ns dev
  local ns=$1 dev=$2
  if [ "$QDISC" = tbf ]; then
    run tc -n "$ns" qdisc add dev "$dev" root tbf rate "$RATE" burst 512kb latency 100ms
  else
    run tc -n "$ns" qdisc add dev "$dev" root handle 1: htb default 10
    run tc -n "$ns" class add dev "$dev" parent 1: classid 1:10 htb rate "$RATE" ceil "$RATE" burst 256k cburst 256k quantum 60000
  fi
}

run ip netns add "$BR"
quiet_sysctls "$BR"
run ip -n "$BR" link add "$BR" type bridge
run ip -n "$BR" link set "$BR" up
for ((i = 0; i < NODES; i++)); do
  ns="${P}-n$i"
  run ip netns add "$ns"
  quiet_sysctls "$ns"
  run ip -n "$ns" link set lo up
  run ip -n "$BR" link add "${P}-b$i" type veth peer name "${P}-v$i" netns "$ns"
  run ip -n "$BR" link set "${P}-b$i" master "$BR"
  run ip -n "$BR" link set "${P}-b$i" up
  run ip -n "$ns" addr add "198.18.0.$((i + 1))/24" dev "${P}-v$i"
  run ip -n "$ns" link set "${P}-v$i" up
  if [ -n "$RATE" ]; then
    shape "$ns" "${P}-v$i"  # node -> bridge (upload)
    shape "$BR" "${P}-b$i"  # bridge -> node (download)
  fi
done
# wait for the bridge ports to forward (no STP: immediate, but be sure)
for ((w = 0; w < 50; w++)); do
  down=$(ip -n "$BR" -o link show master "$BR" | grep -vc 'state UP' || true)
  [ "$down" = 0 ] && break
  sleep 0.1
done

MASTER_ADDR=198.18.0.1
# Any port is free in node 0's brand-new namespace; pick one at random and
# make sure it and port+1 (coll's rendezvous) really are.
while :; do
  MASTER_PORT=$((20000 + RANDOM % 30000))
  if ! ip netns exec "${P}-n0" ss -Htan 2>/dev/null | awk '{print $4}' |
      grep -Eq ":($MASTER_PORT|$((MASTER_PORT + 1)))$"; then break; fi
done
echo "netns.sh: $P: $NODES node(s) x [$(IFS=,; echo "${PER[*]}")] rank(s) = $WORLD, link ${RATE:-unshaped}${RATE:+ ($QDISC)}, master $MASTER_ADDR:$MASTER_PORT, timeout ${TIMEOUT}s" >&2

# ---- ranks ------------------------------------------------------------------
# Each node also gets its own UTS namespace with hostname node<i>, so that
# messages name the emulated node (the host's own hostname is not touched).
UTS=(sh -c 'exec "$@"')
if command -v unshare >/dev/null 2>&1 && unshare --uts true 2>/dev/null; then
  UTS=(unshare --uts -- sh -c 'printf %s "$0" >/proc/sys/kernel/hostname && exec "$@"')
fi
rank=0
for ((i = 0; i < NODES; i++)); do
  for ((l = 0; l < PER[i]; l++)); do
    say "rank $rank: node $i local $l: $*"
    (
      trap - EXIT INT TERM HUP
      ip netns exec "${P}-n$i" "${UTS[@]}" node$i env RANK=$rank WORLD_SIZE=$WORLD LOCAL_RANK=$l LOCAL_WORLD_SIZE=${PER[i]} \
        NODE_RANK=$i MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT COLL_HOSTID=node$i \
        COLL_SOCKET_IFNAME="=${P}-v$i" COLL_TIMEOUT="${COLL_TIMEOUT:-$TIMEOUT}" COLL_NETNS_NODE=$i \
        "$@" </dev/null 2>&1 | sed -u "s/^/[$rank] /"
      exit "${PIPESTATUS[0]}"
    ) &
    RPIDS+=($!)
    rank=$((rank + 1))
  done
done

START=$SECONDS
DEADLINE=$((SECONDS + TIMEOUT))
FIRSTFAIL=""
GIVEUP=""
left=$WORLD
while [ "$left" -gt 0 ]; do
  for ((r = 0; r < WORLD; r++)); do
    [ -n "${RSTATUS[r]:-}" ] && continue
    kill -0 "${RPIDS[r]}" 2>/dev/null && continue
    wait "${RPIDS[r]}"
    st=$?
    RSTATUS[r]=$st
    left=$((left - 1))
    if [ "$st" != 0 ]; then
      echo "netns.sh: rank $r exited with status $st" >&2
      if [ -z "$FIRSTFAIL" ]; then FIRSTFAIL=$st; GIVEUP=$((SECONDS + GRACE)); fi
    fi
  done
  [ "$left" -gt 0 ] || break
  if [ "$SECONDS" -ge "$DEADLINE" ]; then
    echo "netns.sh: timeout after ${TIMEOUT}s: $left rank(s) still running; killing them" >&2
    FIRSTFAIL=124
    break
  fi
  if [ -n "$GIVEUP" ] && [ "$SECONDS" -ge "$GIVEUP" ]; then
    echo "netns.sh: $left rank(s) still running ${GRACE}s after a failure; killing them" >&2
    break
  fi
  sleep 0.2
done
if [ "$left" -gt 0 ]; then
  for ((r = 0; r < WORLD; r++)); do [ -z "${RSTATUS[r]:-}" ] && echo "netns.sh: killing rank $r" >&2; done
  teardown_prefix "$P" # kills every process in the namespaces
fi
echo "netns.sh: $P: $((WORLD - left)) of $WORLD rank(s) finished in $((SECONDS - START))s, status ${FIRSTFAIL:-0}" >&2
exit "${FIRSTFAIL:-0}"
