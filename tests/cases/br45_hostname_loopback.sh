#!/usr/bin/env bash
# BR-45 (pytorch/pytorch#26049, #26166, #8664; NVIDIA/nccl#913, #2047, #177):
# the address a rank advertises must reach the other host: not a loopback
# address its hostname maps to, not a docker-style veth that carries the same
# address on both hosts, not a prefix-matched sibling of the override.
#
# Recipe addresses mapped into 198.18.0.0/15 with the same structure:
#   veth 10.99.0.1/24 <-> 10.99.0.2/24  ->  198.18.99.1/24 <-> 198.18.99.2/24
#   vethf00 192.168.250.1/24 (both)     ->  198.19.250.1/24 (both)
# hostA/hostB map to 127.0.1.1 in their own /etc/hosts (the Debian default).
# vethf00 is an ifb device (no dummy module here), created before the veth so
# that it comes first in the interface list; eth9.7 (recipe: a VLAN) is an ifb
# device with only its IPv6 link-local address.
#
#   1. root 198.18.99.1, no override
#   2. root "hostA": nsA's hosts file maps it to 127.0.1.1, nsB's to 198.18.99.1
#   3. a hostname that resolves nowhere (no entry, no nameserver), root 198.18.99.1
#   4. nsA's veth renamed eth9 (address kept), plus eth9.7; rank 0 has
#      COLL_SOCKET_IFNAME=eth9 (a prefix of eth9.7 too)
# Expected: 3.0 everywhere within 20 s (recipe: 10 s + 10 s slack); while the
# ranks hold their communicators, every established TCP connection in both
# namespaces is between 198.18.99.1 and 198.18.99.2 (none on 127.x, none on
# vethf00's 198.19.250.1, none to itself). Run 2 may instead fail on every
# rank within 30 s naming the loopback resolution; coll makes it succeed.
# COLL_TIMEOUT=10 and COLL_INIT_TIMEOUT=10. About 5 s.
source "$(dirname "$0")/helper_iface.bash"
iface_init br45
A=$(iface_ns a)
B=$(iface_ns b)
iface_ifb "$A" vethf00 198.19.250.1/24
iface_ifb "$B" vethf00 198.19.250.1/24
iface_veth "$A" eth0 198.18.99.1/24 "$B" eth0 198.18.99.2/24
printf '127.0.0.1\tlocalhost\n127.0.1.1\thostA\n' >"$IFACE_TMP/hosts.a"
printf '127.0.0.1\tlocalhost\n127.0.1.1\thostB\n198.18.99.1\thostA\n' >"$IFACE_TMP/hosts.b"
printf '127.0.0.1\tlocalhost\n' >"$IFACE_TMP/hosts.none"
R="$IFACE_TMP/resolv.none"
ONLY_VETH='^198\.18\.99\.[12]:[0-9]+$'

iface_begin 1_root_address
MASTER_ADDR=198.18.99.1
iface_launch 0 "$A" hostA "$IFACE_TMP/hosts.a" "$R"
iface_launch 1 "$B" hostB "$IFACE_TMP/hosts.b" "$R"
iface_finish "$A" "$B"
iface_expect_ok 20
iface_expect_conns "$A" "$ONLY_VETH"
iface_expect_conns "$B" "$ONLY_VETH"

iface_begin 2_root_hostname_loopback_on_A
MASTER_ADDR=hostA
D=(COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=NET)
iface_launch 0 "$A" hostA "$IFACE_TMP/hosts.a" "$R" "${D[@]}"
iface_launch 1 "$B" hostB "$IFACE_TMP/hosts.b" "$R" "${D[@]}"
iface_finish "$A" "$B"
iface_expect_ok 20
iface_expect_conns "$A" "$ONLY_VETH"
iface_expect_conns "$B" "$ONLY_VETH"
grep -q 'using interface eth0 address 198.18.99.1 (first usable interface; the rendezvous is on loopback here: 127.0.1.1)' \
  "$IFACE_RUN/rank0.out" || iface_bad "2: rank 0 did not log its choice with the loopback rendezvous"
grep -q 'using interface eth0 address 198.18.99.2 (it reaches the rendezvous 198.18.99.1)' "$IFACE_RUN/rank1.out" ||
  iface_bad "2: rank 1 did not log the route to the rendezvous"

iface_begin 3_hostname_unresolvable
MASTER_ADDR=198.18.99.1
iface_launch 0 "$A" nowhere-a "$IFACE_TMP/hosts.none" "$R"
iface_launch 1 "$B" nowhere-b "$IFACE_TMP/hosts.none" "$R"
iface_finish "$A" "$B"
iface_expect_ok 20
iface_expect_conns "$A" "$ONLY_VETH"
iface_expect_conns "$B" "$ONLY_VETH"

iface_begin 4_override_eth9
ip -n "$A" link set eth0 down
ip -n "$A" link set eth0 name eth9
ip -n "$A" link set eth9 up
iface_ifb "$A" eth9.7
addrs=$(ip -n "$A" -4 -o addr show dev eth9)
[[ "$addrs" == *198.18.99.1/24* ]] || ip -n "$A" addr add 198.18.99.1/24 dev eth9
iface_launch 0 "$A" hostA "$IFACE_TMP/hosts.a" "$R" COLL_SOCKET_IFNAME=eth9 "${D[@]}"
iface_launch 1 "$B" hostB "$IFACE_TMP/hosts.b" "$R"
iface_finish "$A" "$B"
iface_expect_ok 20
iface_expect_conns "$A" "$ONLY_VETH"
iface_expect_conns "$B" "$ONLY_VETH"
n=$(grep -c 'using interface eth9 address 198.18.99.1 ' "$IFACE_RUN/rank0.out")
others=$(grep 'using interface' "$IFACE_RUN/rank0.out" | grep -vc 'using interface eth9 address 198.18.99.1 ')
[ "$n" -ge 1 ] && [ "$others" = 0 ] || iface_bad "4: rank 0 used another interface than eth9 (or did not log it)"

iface_end
