#!/usr/bin/env bash
# BR-25 (NVIDIA/nccl#929, #286): two "hosts" that both carry a docker0 with
# the same address; a rank must advertise the interface that connects the
# hosts, never lo or docker*, and an override naming docker0 (or nothing that
# exists) must be an error in bounded time, not a hang or a connection to the
# rank's own docker0 taken for its peer.
#
# Recipe addresses mapped into 198.18.0.0/15 with the same structure:
#   veth 10.99.0.1/24 <-> 10.99.0.2/24  ->  198.18.99.1/24 <-> 198.18.99.2/24
#   docker0 172.17.0.1/16 (both sides)  ->  198.19.17.1/16 (both sides)
# docker0 is an ifb device (no dummy module here), created before the veth so
# that it comes first in the interface list. Hostnames hostA/hostB (UTS
# namespaces) make the ranks two nodes, so data goes over TCP.
#
# Runs: (1) no override: 3.0 everywhere within 20 s (recipe: 10 s + 10 s
# slack), every TCP connection on 198.18.99.x; (2) COLL_SOCKET_IFNAME=docker0:
# every rank gets an error within 30 s (the init timeout: a connection to the
# peer's docker0 address reaches this host's own docker0, where the peer's
# listener is not, so it is refused; a connection that lands on the wrong
# process is dropped by its hello check) and
# warns at init that docker0 is not how it reaches the root; (3) COLL_SOCKET_IFNAME=nosuch0: every
# rank gets an error naming nosuch0 and the interfaces that exist: rank 1 at
# once, rank 0 (the launcher-mode rendezvous host) after its failed root has
# spent up to 5 s (COLL_BOOT_FAIL_LINGER) telling ranks still joining: 8 s.
# COLL_TIMEOUT=10 and COLL_INIT_TIMEOUT=10 as in the recipe. About 15 s.
source "$(dirname "$0")/helper_iface.bash"
iface_init br25
A=$(iface_ns a)
B=$(iface_ns b)
iface_ifb "$A" docker0 198.19.17.1/16
iface_ifb "$B" docker0 198.19.17.1/16
iface_veth "$A" eth0 198.18.99.1/24 "$B" eth0 198.18.99.2/24
MASTER_ADDR=198.18.99.1
H="$IFACE_TMP/hosts.plain"

iface_begin default
iface_launch 0 "$A" hostA "$H" ""
iface_launch 1 "$B" hostB "$H" ""
iface_finish "$A" "$B"
iface_expect_ok 20
iface_expect_conns "$A" '^198\.18\.99\.[12]:[0-9]+$'
iface_expect_conns "$B" '^198\.18\.99\.[12]:[0-9]+$'

iface_begin override_docker0
iface_launch 0 "$A" hostA "$H" "" COLL_SOCKET_IFNAME=docker0 COLL_DEBUG=WARN
iface_launch 1 "$B" hostB "$H" "" COLL_SOCKET_IFNAME=docker0 COLL_DEBUG=WARN
iface_finish "$A" "$B"
iface_expect_error 30 'ERROR (init|allreduce):'
for r in 0 1; do # the warning that says why, at init
  grep -q "using interface docker0 address 198.19.17.1 .*reaches the rendezvous 198.18.99.1 through eth0" \
    "$IFACE_RUN/rank$r.out" || iface_bad "override_docker0: rank $r did not warn that docker0 does not reach the root"
done

iface_begin override_missing
iface_launch 0 "$A" hostA "$H" "" COLL_SOCKET_IFNAME=nosuch0
iface_launch 1 "$B" hostB "$H" "" COLL_SOCKET_IFNAME=nosuch0
iface_finish "$A" "$B"
iface_expect_error 8 'ERROR init: invalid argument: .*COLL_SOCKET_IFNAME=nosuch0.*eth0'

iface_end
