#!/usr/bin/env bash
# BR-26 (pytorch/pytorch#135355, #121807; pytorch/gloo#268): address families.
# 2 ranks on one host (one network namespace), int32 all-reduce of 1 element,
# rank r contributes r+1: every rank must get 3, never an abort or a hang.
#   (a) IPv6 only: the namespace's only address is ::1 (127.0.0.1 removed
#       from lo); root [::1]:port
#   (b) mixed families: rank 0 COLL_SOCKET_FAMILY=AF_INET6, rank 1
#       COLL_SOCKET_FAMILY=AF_INET; root "localhost", which a private
#       /etc/hosts maps to both 127.0.0.1 and ::1 (coll handles both
#       families at once: it succeeds)
#   (c) IPv6 disabled in the namespace (net.ipv6.conf.all.disable_ipv6=1);
#       root 127.0.0.1
# Each runs twice: as given (the data goes through shared memory and the
# mailbox inside the host) and with COLL_SHM_DISABLE=1 (through TCP
# connections of those families). Limit 30 s each; COLL_TIMEOUT=10. About 3 s.
source "$(dirname "$0")/helper_iface.bash"
iface_init br26
V6=$(iface_ns v6)
ip -n "$V6" addr del 127.0.0.1/8 dev lo
MIX=$(iface_ns mix)
NO6=$(iface_ns no6)
ip netns exec "$NO6" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 \
  net.ipv6.conf.lo.disable_ipv6=1
printf '127.0.0.1\tlocalhost\n::1\tlocalhost\n' >"$IFACE_TMP/hosts.dual"
H="$IFACE_TMP/hosts.dual"
addrs=$(ip -n "$V6" -o addr show)
iface_say "(a) addresses: $(echo "$addrs" | awk '{print $2, $4}' | tr '\n' ' ')"
[[ "$addrs" == *127.0.0.1* ]] && iface_bad "(a) 127.0.0.1 is still there"
addrs=$(ip -n "$NO6" -o addr show)
[[ "$addrs" == *inet6* ]] && iface_bad "(c) IPv6 is not disabled: $addrs"

for shm in "" COLL_SHM_DISABLE=1; do
  sfx=${shm:+_noshm}
  iface_begin "a_ipv6_only$sfx"
  MASTER_ADDR=::1
  iface_launch 0 "$V6" host6 "$H" "" $shm -- -c 1 -t int32
  iface_launch 1 "$V6" host6 "$H" "" $shm -- -c 1 -t int32
  iface_finish "$V6"
  iface_expect_ok 30

  iface_begin "b_mixed_families$sfx"
  MASTER_ADDR=localhost
  iface_launch 0 "$MIX" hostm "$H" "" COLL_SOCKET_FAMILY=AF_INET6 $shm -- -c 1 -t int32
  iface_launch 1 "$MIX" hostm "$H" "" COLL_SOCKET_FAMILY=AF_INET $shm -- -c 1 -t int32
  iface_finish "$MIX"
  iface_expect_ok 30
  sed 's/^/  /' "$IFACE_RUN/ss.$MIX" 2>/dev/null

  iface_begin "c_ipv6_disabled$sfx"
  MASTER_ADDR=127.0.0.1
  iface_launch 0 "$NO6" host4 "$H" "" $shm -- -c 1 -t int32
  iface_launch 1 "$NO6" host4 "$H" "" $shm -- -c 1 -t int32
  iface_finish "$NO6"
  iface_expect_ok 30
done

iface_end
