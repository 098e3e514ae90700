#!/usr/bin/env bash
# run_torchrun_style.sh N PROGRAM [ARGS...] - starts N processes of PROGRAM the
# way torchrun does (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
# MASTER_ADDR=127.0.0.1, MASTER_PORT), waits for all, and exits non-zero if
# any rank did. coll's rendezvous listens on MASTER_PORT+1 (torch's own store
# owns MASTER_PORT). Every rank is killed after 60 s.
set -u
n=$1; shift
# a free port p whose p+1 is free too (the kernel picks p)
port=$(python3 -c 'import socket
for _ in range(50):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]
    t = socket.socket()
    try:
        t.bind(("127.0.0.1", p + 1)); print(p); break
    except OSError: pass
    finally: s.close(); t.close()')
pids=()
for ((r = 0; r < n; r++)); do
  RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    COLL_SOCKET_IFNAME=${COLL_SOCKET_IFNAME:-lo} timeout -k 5 60 "$@" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
