"""Sends and receives of the coll backend.

They do not go through the group's communicator: coll runs a communicator's
work strictly in issue order, so irecv(peer) followed by isend(peer) on both
sides would wait for each other forever (gloo runs them independently).
Instead every direction src -> dst gets its own two-rank communicator, made on
first use through the store, with a thread that runs that direction's
messages in order (_Channel).  Messages of one direction stay ordered (coll
has no tags; tags are ignored), different directions and collectives run
independently, as with gloo.
"""
import collections
import threading
import weakref

import torch

from . import _lib
from ._dtypes import _ptr
from ._rendezvous import _store_get_when_counted


def byte_view(t):
    """1-D uint8 view of a contiguous tensor's bytes."""
    if t.numel() == 0:
        return torch.empty(0, dtype=torch.uint8, device=t.device)
    flat = t.reshape(-1)
    return flat.view(torch.uint8) if t.element_size() != 1 or t.dtype != torch.uint8 else flat


def split_offsets(t, given, ws, name, what):
    """(byte offset, byte count) per rank of t split along dim 0 by `given`
    (rows per rank; empty: ws equal parts) -- all_to_all_single's splits."""
    rows = t.shape[0] if t.dim() else 1
    rowb = t.element_size()
    for d in t.shape[1:]:
        rowb *= d
    if not given:
        if rows % ws:
            raise RuntimeError("coll: %s: %s dim 0 (%d) is not divisible by world size %d" % (what, name, rows, ws))
        given = [rows // ws] * ws
    if len(given) != ws or sum(given) != rows or any(g < 0 for g in given):
        raise RuntimeError("coll: %s: %s split sizes %s do not match dim 0 = %d over %d ranks"
                           % (what, name, list(given), rows, ws))
    offs, o = [], 0
    for g in given:
        offs.append((o * rowb, g * rowb))
        o += g
    return offs


def alltoall_calls(sends, recvs, me, ws, comm, stream, what):
    """The sends and receives of an all-to-all (call inside a coll group):
    sends/recvs per peer a byte view (1-D uint8 tensor) or None; the local
    block (index me) is the caller's copy."""
    for r in range(ws):
        if r == me:
            continue
        s, d = sends[r], recvs[r]
        if s is not None and s.numel():
            _lib.check(_lib.lib.collSend(_ptr(s), s.numel(), _lib.UINT8, r, comm, stream), what)
        if d is not None and d.numel():
            _lib.check(_lib.lib.collRecv(_ptr(d), d.numel(), _lib.UINT8, r, comm, stream), what)


class _Channel:
    """Messages from rank src to rank dst of one process group, over a
    two-rank communicator of their own (src is its rank 0), created on first
    use through the group's store, by this channel's thread so that neither
    side blocks its caller.  The thread runs the messages in issue order with
    blocking coll calls and completes each future."""

    def __init__(self, eng, src, dst):
        self.eng = weakref.proxy(eng)
        self.src, self.dst = src, dst
        self.sending = eng.rank == src
        self.rank = eng.rank
        self.timeout = getattr(eng, "timeout_sec", None)
        self.cond = threading.Condition()
        self.q = collections.deque()
        self.stop = False
        self.comm = None
        self.error = None
        self.inflight = 0
        self.thread = threading.Thread(target=self._run, args=(eng.store, eng.gen), daemon=True,
                                       name="coll-p2p-%d-%d" % (src, dst))
        self.thread.start()

    def put(self, ptr_keep, nbytes, fut, result, finalize, work):
        with self.cond:
            if self.stop:
                raise RuntimeError("coll: the process group was destroyed")
            self.q.append((ptr_keep, nbytes, fut, result, finalize, work))
            self.inflight += 1
            self.cond.notify_all()

    def _connect(self, store, gen):
        key = "torch_coll/p2p/%d/%d-%d" % (gen, self.src, self.dst)
        if self.sending:
            uid = _lib.get_unique_id()
            store.set(key, uid)
            store.add(key + "/ready", 1)
        else:
            uid = _store_get_when_counted(store, key + "/ready", 1, key, self.timeout,
                                          "the channel from rank %d" % self.src)
        return _lib.comm_init_rank(uid, 2, 0 if self.sending else 1, self.timeout)

    def _run(self, store, gen):
        what = "%s rank %d %s rank %d" % ("send from" if self.sending else "receive on", self.rank,
                                         "to" if self.sending else "from", self.dst if self.sending else self.src)
        peer = 1 if self.sending else 0
        while True:
            with self.cond:
                while not self.q and not self.stop:
                    self.cond.wait()
                if not self.q:
                    return
                buf, n, fut, result, finalize, work = self.q[0]
            err = self.error
            if err is None and n and self.comm is None:
                try:
                    self.comm = self._connect(store, gen)
                except Exception as e:
                    err = self.error = "coll: setting up the channel for %s failed: %s" % (what, e)
            if err is None and n:
                ptr = buf.data_ptr()
                if self.sending:
                    r = _lib.lib.collSend(ptr, n, _lib.UINT8, peer, self.comm, None)
                else:
                    r = _lib.lib.collRecv(ptr, n, _lib.UINT8, peer, self.comm, None)
                if r != _lib.SUCCESS:
                    err = self.error = _lib.message(r, what)
            if err is None and finalize is not None:
                try:
                    finalize()
                except Exception as e:  # pragma: no cover
                    err = "coll: finishing %s failed: %r" % (what, e)
            with self.cond:
                self.q.popleft()
            if err is None:
                fut.set_result(result)
            else:
                fut.set_exception(RuntimeError(err))
            try:
                self.eng.retain([work])
            except ReferenceError:
                pass
            buf = fut = result = finalize = work = None  # see _Engine._run: nothing kept while idle
            with self.cond:
                self.inflight -= 1
                self.cond.notify_all()

    def close(self, timeout):
        with self.cond:
            self.stop = True
            self.cond.notify_all()
        if self.thread is not threading.current_thread():
            self.thread.join(timeout)
            if self.thread.is_alive():
                return  # blocked inside coll on a peer: leak rather than free under it
        if self.comm is not None:
            ae = _lib.async_error(self.comm)
            if ae not in (None, _lib.SUCCESS, _lib.IN_PROGRESS):
                _lib.lib.collCommAbort(self.comm)
            else:
                _lib.lib.collCommDestroy(self.comm)
            self.comm = None
