# helper_iface.bash - shared by the interface cases br25_*.sh, br26_*.sh,
# br45_*.sh (sourced, not a test: the case glob takes *.sh only).
#
# Emulated hosts are network namespaces <P>-<x> (P = cif<NNNN>, NNNN from $$,
# the next free one if taken), each rank also gets a private mount namespace
# (its own /etc/hosts and /etc/resolv.conf by bind mount) and a UTS namespace
# (its own hostname). Ranks run build/tests/cases/case_iface_rank
# (helper_iface_rank.c) with the torchrun environment. Everything is removed
# on exit, on failure and on INT/TERM/HUP (trap); a run that was SIGKILLed is
# cleaned up by the next one (lock directory /run/colliface/<P> holds the
# owner's pid). Only 198.18.0.0/15 addresses are used.
#
# Needs root, iproute2 (ip netns, veth, ifb), unshare, ss, timeout; exits 77
# (skipped) without them.
set -u -o pipefail

IFACE_BUILD=${1:?usage: $0 BUILD_DIR SOURCE_DIR}
# The scenarios set what they need: nothing inherited may change them (e.g.
# tests/run_all.sh exports COLL_SOCKET_IFNAME=lo). COLL_DEBUG* stay.
for v in $(compgen -e | grep -E '^(COLL_|MASTER_|RANK$|WORLD_SIZE$|LOCAL_)' | grep -v '^COLL_DEBUG'); do unset "$v"; done
IFACE_RANK="$IFACE_BUILD/tests/cases/case_iface_rank"
IFACE_LOCKROOT=/run/colliface
IFACE_P=""
IFACE_TMP=""
IFACE_FAILS=0
MASTER_PORT=29500 # every namespace is new: any port is free in it

iface_say() { echo "$IFACE_NAME: $*"; }
iface_bad() { echo "$IFACE_NAME: FAIL: $*"; IFACE_FAILS=$((IFACE_FAILS + 1)); }

# Kills every process in the namespaces of prefix $1, then deletes them.
iface_teardown_prefix() {
  local p=$1 ns pids sig
  local -a mine=()
  mapfile -t mine < <(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${p}-[a-z0-9]+$")
  for sig in TERM KILL; do
    pids=""
    for ns in "${mine[@]}"; do pids+=" $(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"; done
    pids=$(echo $pids)
    [ -z "$pids" ] && break
    kill -"$sig" $pids 2>/dev/null
    sleep 0.3
  done
  for ns in "${mine[@]}"; do ip netns del "$ns" 2>/dev/null || echo "warning: cannot delete netns $ns" >&2; done
}

iface_cleanup() {
  trap '' INT TERM HUP
  [ -n "$IFACE_P" ] && iface_teardown_prefix "$IFACE_P"
  [ -n "$IFACE_P" ] && rm -rf "${IFACE_LOCKROOT:?}/$IFACE_P"
  rmdir "$IFACE_LOCKROOT" 2>/dev/null
  [ -n "$IFACE_TMP" ] && [ -z "${IFACE_KEEP:-}" ] && rm -rf "$IFACE_TMP"
  IFACE_P=""
  IFACE_TMP=""
}

# iface_init NAME: checks, prefix, lock, traps, temp dir.
iface_init() {
  IFACE_NAME=$1
  if [ "$(id -u)" != 0 ]; then echo "$IFACE_NAME: SKIPPED: needs root (namespaces)"; exit 77; fi
  local t
  for t in ip unshare ss timeout; do
    command -v $t >/dev/null 2>&1 || { echo "$IFACE_NAME: SKIPPED: $t not found"; exit 77; }
  done
  ip netns list >/dev/null 2>&1 || { echo "$IFACE_NAME: SKIPPED: no 'ip netns'"; exit 77; }
  unshare -m --uts true 2>/dev/null || { echo "$IFACE_NAME: SKIPPED: unshare -m --uts fails"; exit 77; }
  [ -x "$IFACE_RANK" ] || { echo "$IFACE_NAME: FAIL: $IFACE_RANK not built"; exit 1; }
  mkdir -p "$IFACE_LOCKROOT" || exit 1
  local d owner
  for d in "$IFACE_LOCKROOT"/cif[0-9][0-9][0-9][0-9]; do # leftovers of SIGKILLed runs
    [ -d "$d" ] || continue
    owner=$(cat "$d/pid" 2>/dev/null || true)
    [ -n "$owner" ] && kill -0 "$owner" 2>/dev/null && continue
    [ -z "$owner" ] && [ -n "$(find "$d" -maxdepth 0 -newermt '-10 seconds' 2>/dev/null)" ] && continue
    echo "$IFACE_NAME: removing leftovers of a dead run: $(basename "$d")"
    iface_teardown_prefix "$(basename "$d")"
    rm -rf "$d"
  done
  local base=$(($$ % 10000)) try cand
  for ((try = 0; try < 100; try++)); do
    cand=$(printf 'cif%04d' $(((base + try) % 10000)))
    mkdir -p "$IFACE_LOCKROOT" 2>/dev/null
    if mkdir "$IFACE_LOCKROOT/$cand" 2>/dev/null; then
      if ip netns list | awk '{print $1}' | grep -q "^${cand}-"; then rmdir "$IFACE_LOCKROOT/$cand"; continue; fi
      IFACE_P=$cand
      echo $$ >"$IFACE_LOCKROOT/$cand/pid"
      break
    fi
  done
  [ -n "$IFACE_P" ] || { echo "$IFACE_NAME: FAIL: no free cifNNNN prefix"; exit 1; }
  trap iface_cleanup EXIT
  trap 'echo "$IFACE_NAME: interrupted"; exit 130' INT
  trap 'echo "$IFACE_NAME: terminated"; exit 143' TERM
  trap 'exit 129' HUP
  IFACE_TMP=$(mktemp -d "/tmp/${IFACE_NAME}.XXXXXX")
  printf '127.0.0.1\tlocalhost\n' >"$IFACE_TMP/hosts.plain"
  : >"$IFACE_TMP/resolv.none" # no nameserver line: nothing to ask (and none reachable anyway)
}

# iface_ns X: creates namespace <P>-X with lo up; prints its name.
iface_ns() {
  local ns="${IFACE_P}-$1"
  ip netns add "$ns" || { echo "$IFACE_NAME: FAIL: ip netns add $ns" >&2; exit 1; }
  ip -n "$ns" link set lo up
  echo "$ns"
}

# iface_ifb NS NAME [ADDR/LEN]: an up device with no wire (stands in for a
# dummy: this kernel may lack the dummy and vlan modules; ifb is addressable
# and "running" like a dummy).
iface_ifb() {
  ip -n "$1" link add "$2" type ifb || { echo "$IFACE_NAME: FAIL: ifb $2 in $1" >&2; exit 1; }
  [ -n "${3:-}" ] && ip -n "$1" addr add "$3" dev "$2"
  ip -n "$1" link set "$2" up
}

# iface_veth NSA NAMEA ADDRA NSB NAMEB ADDRB: a veth pair between two
# namespaces (created inside them: the root namespace never sees it).
iface_veth() {
  ip -n "$1" link add "$2" type veth peer name "$5" netns "$4" || { echo "$IFACE_NAME: FAIL: veth" >&2; exit 1; }
  ip -n "$1" addr add "$3" dev "$2"
  ip -n "$4" addr add "$6" dev "$5"
  ip -n "$1" link set "$2" up
  ip -n "$4" link set "$5" up
}

# iface_launch R NS HOST HOSTS RESOLV [VAR=VALUE...] -- [RANK ARGS...]
# (launch ranks in rank order: iface_finish matches done.<i> to the i-th.)
# Starts rank R of WORLD_SIZE (default 2) in NS with hostname HOST, HOSTS as
# /etc/hosts and RESOLV as /etc/resolv.conf ("" = keep). Output goes to
# $IFACE_RUN/rank<R>.out; the pid is appended to IFACE_PIDS. MASTER_ADDR must
# be set; COLL_TIMEOUT defaults to 10 (the recipes' collective timeout).
iface_launch() {
  local r=$1 ns=$2 host=$3 hosts=$4 resolv=$5
  shift 5
  local -a envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  [ "${1:-}" = "--" ] && shift
  timeout -k 5 "${IFACE_LIMIT:-60}" ip netns exec "$ns" unshare -m --uts -- sh -c '
      printf %s "$0" >/proc/sys/kernel/hostname || exit 1
      if [ -n "$1" ]; then mount --bind "$1" /etc/hosts || exit 1; fi
      if [ -n "$2" ]; then mount --bind "$2" /etc/resolv.conf || exit 1; fi
      shift 2
      exec "$@"' "$host" "$hosts" "$resolv" \
    env RANK="$r" WORLD_SIZE="${IFACE_WORLD:-2}" MASTER_ADDR="$MASTER_ADDR" MASTER_PORT="$MASTER_PORT" \
    COLL_TIMEOUT="${COLL_TIMEOUT:-10}" COLL_INIT_TIMEOUT="${COLL_INIT_TIMEOUT:-10}" "${envs[@]}" \
    "$IFACE_RANK" -H "$IFACE_RUN" "$@" >"$IFACE_RUN/rank$r.out" 2>&1 &
  IFACE_PIDS+=($!)
}

# iface_begin LABEL: a fresh run directory; clears the pid list.
iface_begin() {
  IFACE_LABEL=$1
  IFACE_RUN="$IFACE_TMP/$1"
  mkdir -p "$IFACE_RUN"
  IFACE_PIDS=()
  IFACE_T0=$(date +%s.%N)
  iface_say "--- $1"
}

# iface_finish NS...: waits for the launched ranks. When every rank reached
# its hold point (done.<rank>), lists the TCP connections of each namespace
# into $IFACE_RUN/ss.<ns> first, then lets the ranks finish. Sets IFACE_RC
# (array of exit codes by launch order) and IFACE_SECS (wall time until the
# last rank reached its hold point or exited).
iface_finish() {
  local n=${#IFACE_PIDS[@]} i all ns
  local -a rc=()
  local held=0
  IFACE_SECS=""
  while :; do
    all=1
    for ((i = 0; i < n; i++)); do
      [ -n "${rc[i]:-}" ] && continue
      if ! kill -0 "${IFACE_PIDS[i]}" 2>/dev/null; then
        wait "${IFACE_PIDS[i]}"
        rc[i]=$?
        continue
      fi
      [ -e "$IFACE_RUN/done.$i" ] || all=0
    done
    local running=0
    for ((i = 0; i < n; i++)); do [ -z "${rc[i]:-}" ] && running=1; done
    if [ -z "$IFACE_SECS" ] && { [ "$all" = 1 ] || [ "$running" = 0 ]; }; then
      IFACE_SECS=$(awk -v a="$(date +%s.%N)" -v b="$IFACE_T0" 'BEGIN { printf "%.2f", a - b }')
    fi
    if [ "$all" = 1 ] && [ "$held" = 0 ] && [ "$running" = 1 ]; then
      for ns in "$@"; do ip netns exec "$ns" ss -Htn state established >"$IFACE_RUN/ss.$ns" 2>&1; done
      touch "$IFACE_RUN/go"
      held=1
    fi
    [ "$running" = 0 ] && break
    sleep 0.1
  done
  IFACE_RC=("${rc[@]}")
  for ((i = 0; i < n; i++)); do sed "s/^/  [$i] /" "$IFACE_RUN/rank$i.out"; done
  iface_say "exit codes ${IFACE_RC[*]}, $(printf %.1f "$IFACE_SECS") s"
}

# iface_expect_ok MAXSECS: every rank printed OK and exited 0 within MAXSECS.
iface_expect_ok() {
  local i
  for ((i = 0; i < ${#IFACE_RC[@]}; i++)); do
    [ "${IFACE_RC[i]}" = 0 ] && grep -q "^rank $i/.*: OK " "$IFACE_RUN/rank$i.out" ||
      iface_bad "$IFACE_LABEL: rank $i did not succeed (exit ${IFACE_RC[i]})"
  done
  awk -v s="$IFACE_SECS" -v m="$1" 'BEGIN { exit !(s <= m) }' ||
    iface_bad "$IFACE_LABEL: took $IFACE_SECS s (limit $1 s)"
}

# iface_expect_error MAXSECS REGEX: every rank reported a coll error (exit 2)
# within MAXSECS, and its message matches REGEX (grep -E).
iface_expect_error() {
  local i
  for ((i = 0; i < ${#IFACE_RC[@]}; i++)); do
    [ "${IFACE_RC[i]}" = 2 ] || iface_bad "$IFACE_LABEL: rank $i exit ${IFACE_RC[i]}, expected 2 (a coll error)"
    grep -Eq "$2" "$IFACE_RUN/rank$i.out" || iface_bad "$IFACE_LABEL: rank $i's message does not match /$2/"
  done
  awk -v s="$IFACE_SECS" -v m="$1" 'BEGIN { exit !(s <= m) }' ||
    iface_bad "$IFACE_LABEL: errors took $IFACE_SECS s (limit $1 s)"
}

# iface_expect_conns NS ALLOWED_REGEX: NS had established TCP connections
# while the ranks held, every local and peer address matches ALLOWED_REGEX,
# and none is a connection to itself (local == peer).
iface_expect_conns() {
  local f="$IFACE_RUN/ss.$1"
  if [ ! -s "$f" ]; then iface_bad "$IFACE_LABEL: no established connections listed in $1"; return; fi
  local bad
  bad=$(awk -v re="$2" '{ l = $(NF-1); p = $NF; if (l !~ re || p !~ re || l == p) print }' "$f")
  if [ -n "$bad" ]; then
    iface_bad "$IFACE_LABEL: connections in $1 outside /$2/ (or to itself):"
    echo "$bad" | sed 's/^/    /'
  fi
  iface_say "$1: $(wc -l <"$f") connection(s), all on /$2/"
}

iface_end() {
  if [ "$IFACE_FAILS" = 0 ]; then iface_say "PASS"; exit 0; fi
  iface_say "$IFACE_FAILS check(s) failed"
  exit 1
}
