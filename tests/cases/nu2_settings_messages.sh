#!/usr/bin/env bash
# newuser2 findings 7, 9, 10: settings that were accepted silently or warned
# late, and messages that named the wrong thing. Each check runs a 2-rank
# allreduce_perf -np (its own launcher, kernel-chosen port) or coll_info:
#  7a COLL_HALF_ACCUM=nativ warns at init, before any float16 reduction, in the
#     standard format (host:pid:tid [coll] WARN); NATIVE is accepted (case
#     ignored, as COLL_DEBUG and COLL_SOCKET_FAMILY)
#  7b COLL_IB_HCA=mlx5 on a machine without an HCA port warns (skipped where
#     /sys/class/infiniband has a device, or coll is built without ib)
#  7c COLL_FR_FILE=/nonexistent/... warns once per process over 3 dumps
#     (COLL_FR_SIGNAL=SIGUSR1 sent 3 times to one rank)
#  9  coll_info with COLL_CUDA_LIBRARY=/nonexistent.so: p2p "unavailable:
#     <reason>"; the send/recv row no longer calls itself p2p
#  10 COLL_NET=loopback across processes fails at init with loopback's
#     reason; with a transport plugin carrying the traffic the ib line names
#     the plugin, not tcp
#  8  without CAP_SYS_ADMIN (setpriv drops it; root only) the default
#     COLL_REG_CACHE=-1 cannot read page frames: one WARN per process says
#     registrations are per message; COLL_REG_CACHE=0 chooses it silently
# About 3 s.
set -u -o pipefail
B=${1:?usage: $0 BUILD_DIR SOURCE_DIR}
for v in $(compgen -e | grep -E '^(COLL_|MASTER_|RANK$|WORLD_SIZE$|LOCAL_|TORCHELASTIC)' | grep -v '^COLL_DEBUG'); do
  unset "$v"
done
export COLL_SOCKET_IFNAME=lo COLL_TIMEOUT=20
T=$(mktemp -d)
JOB=""
trap '[ -n "$JOB" ] && kill -- -"$JOB" 2>/dev/null; rm -rf "$T"' EXIT
FAILS=0
bad() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }
perf() { timeout 60 "$B/benchmarks/allreduce_perf" -np 2 -b 8 -e 8 -n 1 -w 1 "$@"; }
WARNRE='^[^ :]+:[0-9]+:[0-9]+ \[coll\] WARN '

# 7a
COLL_HALF_ACCUM=nativ perf -d float >"$T/a" 2>&1 || bad "7a: allreduce_perf failed: $(tail -3 "$T/a")"
n=$(grep -cE "${WARNRE}COLL_HALF_ACCUM=nativ is not one of float, float32, native \(case ignored\); using float$" "$T/a")
[ "$n" -ge 2 ] && ok "7a: COLL_HALF_ACCUM=nativ warned at init ($n processes)" ||
  bad "7a: want a WARN line per rank at init, got $n: $(grep -i half_accum "$T/a")"
grep -q '^\[coll\]' "$T/a" && bad "7a: a line in another format: $(grep '^\[coll\]' "$T/a")"
COLL_HALF_ACCUM=NATIVE perf -d half >"$T/a2" 2>&1 || bad "7a: NATIVE run failed: $(tail -3 "$T/a2")"
grep -qi 'HALF_ACCUM' "$T/a2" && bad "7a: NATIVE warned: $(grep -i half_accum "$T/a2")" || ok "7a: NATIVE accepted"

# 7b
if ! grep -q 'COLL_IB_HCA' <("$B/tools/coll_info" --params 2>/dev/null); then
  echo "skip 7b: built without ib"
elif [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
  echo "skip 7b: this machine has RDMA devices"
else
  COLL_IB_HCA=mlx5 perf >"$T/b" 2>&1 || bad "7b: allreduce_perf failed: $(tail -3 "$T/b")"
  n=$(grep -cE "${WARNRE}COLL_IB_HCA=mlx5 selects no usable HCA port \(ib: .*\); tcp carries the traffic" "$T/b")
  [ "$n" -ge 1 ] && ok "7b: COLL_IB_HCA=mlx5 warned ($n)" || bad "7b: no warning: $(grep -i ib "$T/b" | head -3)"
fi

# 7c: 3 flight-recorder dumps of one rank into an unwritable path
COLL_FR_FILE=/nonexistent/fr.%r COLL_FR_SIGNAL=10 setsid "$B/benchmarks/allreduce_perf" -np 2 -b 8 -e 8 -n 100000000 \
  -w 1 -c 0 >"$T/c" 2>&1 &
JOB=$!
pid=""
for _ in $(seq 100); do
  pid=$(sed -n 's/^#  Rank  0 Group  0 Pid *\([0-9]*\) .*/\1/p' "$T/c")
  [ -n "$pid" ] && grep -q '^ *8 ' "$T/c" 2>/dev/null && break
  [ -n "$pid" ] && sleep 0.5 && break
  sleep 0.1
done
if [ -z "$pid" ]; then
  bad "7c: rank 0 did not start: $(tail -3 "$T/c")"
else
  for _ in 1 2 3; do kill -USR1 "$pid"; sleep 0.3; done
  kill -- -"$JOB" 2>/dev/null
  wait "$JOB" 2>/dev/null
  JOB=""
  n=$(grep -cE "^[^ :]+:$pid:[0-9]+ \[coll\] WARN COLL_FR_FILE=/nonexistent/fr.%r: cannot open" "$T/c")
  [ "$n" = 1 ] && ok "7c: one COLL_FR_FILE warning for 3 dumps" ||
    bad "7c: want 1 COLL_FR_FILE warning of pid $pid, got $n: $(grep FR_FILE "$T/c" | head -4)"
fi

# 9
COLL_CUDA_LIBRARY=/nonexistent.so timeout 60 "$B/tools/coll_info" >"$T/i" 2>&1 || bad "9: coll_info failed"
grep -qE '^p2p +unavailable: .*/nonexistent.so' "$T/i" && ok "9: $(grep '^p2p' "$T/i" | cut -c1-80)..." ||
  bad "9: p2p row: $(grep '^p2p' "$T/i")"
grep -E '^send/recv' "$T/i" | grep -qw p2p && bad "9: send/recv row still says p2p: $(grep '^send/recv' "$T/i")"

# 10
COLL_NET=loopback perf >"$T/l" 2>&1 && bad "10: COLL_NET=loopback across 2 processes succeeded"
n=$(grep -c 'collCommInitRankConfig failed: invalid usage: rank [01]: COLL_NET=loopback only connects ranks that are threads of one process' "$T/l")
[ "$n" = 2 ] && ok "10: COLL_NET=loopback fails at init on both ranks" || bad "10: loopback: $(grep -v '^#' "$T/l" | head -4)"
if grep -q 'COLL_IB_HCA' <("$B/tools/coll_info" --params 2>/dev/null) && [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
  COLL_NET_PLUGIN="$B/tests/libcoll_net_example.so" COLL_SHM_DISABLE=1 COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=INIT \
    perf >"$T/p" 2>&1 || bad "10: plugin run failed: $(grep -v '^#' "$T/p" | tail -3)"
  grep -q 'ib transport not used (.*); example carries the traffic between nodes' "$T/p" && ok "10: the plugin is named" ||
    bad "10: ib line: $(grep 'ib transport not used' "$T/p" | head -1)"
fi
# 8
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
  echo "skip 8: needs root and setpriv"
else
  for rc in "" 0; do
    setpriv --bounding-set -sys_admin env ${rc:+COLL_REG_CACHE=$rc} COLL_NET_PLUGIN="$B/tests/libcoll_net_example.so" \
      COLL_SHM_DISABLE=1 timeout 60 "$B/benchmarks/allreduce_perf" -np 2 -b 1M -e 1M -n 2 -w 1 >"$T/r" 2>&1 ||
      bad "8: run failed: $(grep -v '^#' "$T/r" | tail -3)"
    n=$(grep -cE "${WARNRE}rank [01]: registration cache off: /proc/self/pagemap gives this process no page frames" "$T/r")
    want=2
    [ -n "$rc" ] && want=0
    [ "$n" = "$want" ] && ok "8: COLL_REG_CACHE=${rc:-unset} without CAP_SYS_ADMIN: $n warnings" ||
      bad "8: COLL_REG_CACHE=${rc:-unset}: want $want warnings, got $n: $(grep -v '^#' "$T/r" | head -3)"
  done
fi
[ "$FAILS" = 0 ] && echo "all passed" || echo "$FAILS failed"
exit $((FAILS > 0))
