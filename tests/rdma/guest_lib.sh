# guest_lib.sh - helpers for scripts that tests/rdma/vm.sh runs in the guest.
# Source it: . tests/rdma/guest_lib.sh

# rxe_up NETDEV ADDR [RXE]: Soft-RoCE device RXE (default rxe0) on NETDEV,
# which gets ADDR/24; NETDEV "dummy0" is created. Waits until the port is ACTIVE.
rxe_up() {
  local nd=$1 addr=$2 rxe=${3:-rxe0}
  modprobe rdma_rxe || return 1
  modprobe rdma_ucm 2>/dev/null
  ip link set lo up
  case $nd in
    dummy*) ip link add "$nd" type dummy || return 1 ;;
    eth*) modprobe virtio_net; for _ in $(seq 50); do [ -e /sys/class/net/$nd ] && break; sleep 0.1; done ;;
  esac
  ip addr add "$addr/24" dev "$nd" && ip link set "$nd" up || return 1
  rdma link add "$rxe" type rxe netdev "$nd" || return 1
  for _ in $(seq 100); do
    grep -q ACTIVE /sys/class/infiniband/$rxe/ports/1/state 2>/dev/null && return 0
    sleep 0.1
  done
  echo "rxe_up: $rxe did not become ACTIVE" >&2
  return 1
}

# step NAME CMD...: runs CMD, prints "PASS NAME (Ns)" or "FAIL NAME rc=R (Ns)",
# and counts failures in FAILS.
FAILS=0
step() {
  local name=$1; shift
  local t0=$(date +%s.%N)
  "$@"; local rc=$?
  local dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  if [ $rc = 0 ]; then echo "PASS $name (${dt}s)"; else echo "FAIL $name rc=$rc (${dt}s)"; FAILS=$((FAILS + 1)); fi
  return 0
}
