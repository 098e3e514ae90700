"""How the ranks of a group meet through torch's c10d Store: the unique id
exchange, polling the store without blocking its client, and what torch's
own rendezvous leaves behind between destroy_process_group and the next
init_process_group (BR-17)."""
import select
import socket
import time

import torch
import torch.distributed as dist

from . import _lib


def _store_get_when_counted(store, count_key, n, key, timeout_sec, what):
    """store.get(key) once store counter count_key reached n, by polling the
    counter.  (A blocking store.get may hold the client's lock while it waits:
    with torch 2.x's TCPStore another thread of this process then cannot use
    the store, and the value it waits for may depend on that thread.)"""
    deadline = time.monotonic() + (timeout_sec or 1800)
    delay = 0.0005
    while store.add(count_key, 0) < n:
        if time.monotonic() > deadline:
            raise RuntimeError("coll: timed out waiting for %s in the store" % what)
        time.sleep(delay)
        delay = min(delay * 2, 0.02)
    return bytes(store.get(key))


def _exchange_unique_id(store, rank, size, timeout_sec):
    """-> (epoch, unique id): rank 0's id, passed on through the store under
    keys of this store's current epoch.  Only rank 0 moves the epoch on, and
    only after every rank read this epoch's id, i.e. before any rank can
    finish collCommInitRank (which needs rank 0): so each rank of one init
    reads the same epoch, and the next init (same store, any world size, also
    right after a destroy) finds a new one, never an old id.  The epoch also
    names this group's later store keys (p2p channels, any-source receives,
    monitored barriers)."""
    epoch = store.add("torch_coll/epoch", 0)
    base = "torch_coll/%d/" % epoch
    if rank == 0:
        uid = _lib.get_unique_id()
        store.set(base + "unique_id", uid)
        store.add(base + "ready", 1)
        deadline = time.monotonic() + (timeout_sec or 1800)
        delay = 0.0005
        while store.add(base + "read", 0) < size - 1:
            if time.monotonic() > deadline:
                raise RuntimeError("coll: init: timed out waiting for the other %d ranks to read the unique id "
                                   "from the store (%d did)" % (size - 1, store.add(base + "read", 0)))
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
        store.add("torch_coll/epoch", 1)
    else:
        uid = _store_get_when_counted(store, base + "ready", 1, base + "unique_id", timeout_sec,
                                      "the unique id from rank 0")
        store.add(base + "read", 1)
    return epoch, uid


_BARRIER_PREFIX = getattr(dist.distributed_c10d, "STORE_BASED_BARRIER_PREFIX", "store_based_barrier_key")


def _clear_stale_init_barrier(store, rank, size, comm):
    """torch 1.x ends init_process_group and new_group with a barrier on the
    store key "store_based_barrier_key:<n>" (n counts the groups made since
    the last destroy_process_group, which resets it to 0 but leaves the key)
    that waits until the key's count equals the world size.  So a second
    init_process_group with the same store finds the first one's count there
    and waits until its timeout, whatever the backend (pytorch/pytorch#55967).
    Here every member of the group is inside this creator (collCommInitRank
    just matched them all), so none has added to the key yet: group rank 0
    takes the earlier cycles' counts off (whole multiples of the world size;
    ranks outside a new_group may have added theirs already, fewer than one
    world), then a barrier on the new communicator lets the members go on.
    torch 2.x keys the barrier by the group's name and runs it only with
    TORCH_DIST_INIT_BARRIER=1: nothing to do there."""
    c10d = dist.distributed_c10d
    if not torch.__version__.startswith("1.") or not hasattr(c10d, "_group_count") or \
            not hasattr(c10d, "_store_based_barrier") or not hasattr(store, "underlying_store"):
        return
    if rank == 0:
        base = store.underlying_store  # the store torch runs the barrier on
        key = "%s:%d" % (_BARRIER_PREFIX, c10d._group_count)
        world = c10d.get_world_size() if c10d.is_initialized() else size
        n = base.add(key, 0)
        stale = n if world == size else n - n % world
        if stale > 0:
            base.add(key, -stale)
    if size > 1:
        _lib.check(_lib.lib.collBarrier(comm, None), "collBarrier (init)")


_RENDEZVOUS_WAIT_SECONDS = 10.0


def _rendezvous_watch(store, rank):
    """With init_method env:// or tcp://, torch makes a TCPStore per
    init_process_group, served by rank 0 on MASTER_PORT, and wraps it as
    PrefixStore("default_pg", TCPStore).  Init, destroy and init again on the
    same port then races: a rank that leaves destroy_process_group before rank
    0's old server closed connects its new client to that old server, and the
    next init fails or hangs (for gloo too).  So on the other ranks of a
    default group whose store is such a server, this opens one idle TCP
    connection to it; destroying the group waits until that server closed the
    connection (at most _RENDEZVOUS_WAIT_SECONDS), see
    _wait_rendezvous_closed.  None for every other group or store."""
    if rank == 0 or dist.is_initialized():  # a new_group: the default group's store lives on
        return None
    # torch's prefixes ("cpu/" on 2.x, the group's name, "default_pg") down to the TCPStore
    outer, tcp = store, getattr(store, "underlying_store", None)
    while tcp is not None and not isinstance(tcp, dist.TCPStore):
        outer, tcp = tcp, getattr(tcp, "underlying_store", None)
    if tcp is None:
        return None
    probe = "torch_coll/rendezvous_probe/%d" % rank
    try:
        n = outer.add(probe, 1)
        if tcp.add("default_pg/" + probe, 0) != n:
            return None  # not torch's "default_pg" wrapper: the user's own store, which stays
        return socket.create_connection((tcp.host, tcp.port), timeout=10)
    except (OSError, RuntimeError):
        return None


def _wait_rendezvous_closed(sock, seconds):
    """Waits until the server at the other end of sock closed it (EOF or an
    error), then until that server's listening socket is gone too: the server
    closes its connections first, and a client that connects in between is
    reset a moment later.  So it connects to the port until that is refused
    (nothing listens: the next server is not up yet, and torch's client
    retries until it is) or the connection stays up for a while (the next
    server accepted it).  At most `seconds` in all."""
    deadline = time.monotonic() + seconds
    addr = sock.getpeername()
    try:
        sock.setblocking(False)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            r, _, _ = select.select([sock], [], [], left)
            if r and not sock.recv(4096):
                break
    except OSError:
        pass
    finally:
        sock.close()
    while time.monotonic() < deadline:
        try:
            probe = socket.create_connection(addr[:2], timeout=max(0.01, min(1.0, deadline - time.monotonic())))
        except OSError:
            return  # refused: the old server stopped listening
        try:
            r, _, _ = select.select([probe], [], [], 0.05)
            if not r:
                return  # still connected after 50 ms: a live server (the next one)
            probe.recv(1)  # EOF or a reset from a listener on its way out
        except OSError:
            pass
        finally:
            probe.close()
        time.sleep(0.005)
