"""ProcessGroupColl: a torch.distributed.ProcessGroup that drives libcoll.so.

One instance per torch process group (init_process_group and every
new_group).  Design:

* The communicator comes from the c10d Store torch hands the creator: rank 0
  calls collGetUniqueId and publishes the 128 bytes under a key that is unique
  per initialisation; every rank then calls collCommInitRank.
* Every operation is issued on one coll stream of this group (the call returns
  at once; coll's progress thread runs the work in issue order).  A Python
  worker thread per group waits with collStreamSynchronize and then, in issue
  order, runs each operation's finishing step (copies back into non-contiguous
  outputs and the like) and completes its torch.futures.Future.  The Work
  returned (CollWork) wraps that future: async_op=True really overlaps, and
  Work.wait() raises the RuntimeError (collGetLastError's text) of a failed
  operation, e.g. when a peer died.  (A _create_work_from_future Work would not:
  on torch 1.13 its wait() ignores the future's error.)
* Sends and receives do not go through the group's communicator: coll runs a
  communicator's work strictly in issue order, so irecv(peer) followed by
  isend(peer) on both sides would wait for each other forever (gloo runs them
  independently).  Instead every direction src -> dst gets its own two-rank
  communicator, made on first use through the store, with a thread that runs
  that direction's messages in order (_Channel).  Messages of one direction
  stay ordered (coll has no tags; tags are ignored), different directions and
  collectives run independently, as with gloo.
* Data movement (broadcast, all-gather, scatter, gather, all-to-all, send and
  recv) moves bytes, so it works for every dtype.  Reductions map the torch
  dtype to coll's: int8, uint8, int32, int64, float16, float32, float64,
  bfloat16 (and uint32/uint64 where torch has them); bool reduces as a byte
  with SUM/MAX = logical or and PRODUCT/MIN = logical and (what gloo gives);
  complex reduces as pairs of reals for SUM, AVG and PREMUL_SUM.  Everything
  else (int16, BAND/BOR/BXOR, complex MIN...) raises a RuntimeError that says
  so.
"""
import ctypes
import collections
import datetime
import os
import select
import socket
import threading
import time
import weakref

import torch
import torch.distributed as dist

from . import _lib
from ._lib import CollError

try:
    _c10d = torch._C._distributed_c10d
except AttributeError:  # pragma: no cover
    raise ImportError("torch_coll needs torch built with distributed support")

_create_work_from_future = _c10d._create_work_from_future
_ProcessGroup = _c10d.ProcessGroup
BACKEND_NAME = "coll"

# ---------------------------------------------------------------------------
# dtypes and reduction ops

_RED_TYPES = {
    torch.int8: _lib.INT8,
    torch.uint8: _lib.UINT8,
    torch.int32: _lib.INT32,
    torch.int64: _lib.INT64,
    torch.float16: _lib.FLOAT16,
    torch.float32: _lib.FLOAT32,
    torch.float64: _lib.FLOAT64,
    torch.bfloat16: _lib.BFLOAT16,
    torch.bool: _lib.UINT8,  # with the op remapped, see _reduction()
}
for _n, _c in (("uint32", _lib.UINT32), ("uint64", _lib.UINT64)):
    if hasattr(torch, _n):  # torch >= 2.3
        _RED_TYPES[getattr(torch, _n)] = _c
_COMPLEX_REAL = {torch.complex64: _lib.FLOAT32, torch.complex128: _lib.FLOAT64}
if hasattr(torch, "complex32"):
    _COMPLEX_REAL[torch.complex32] = _lib.FLOAT16

_OPS = {"SUM": _lib.SUM, "PRODUCT": _lib.PROD, "MIN": _lib.MIN, "MAX": _lib.MAX, "AVG": _lib.AVG}
# bool as a byte of 0/1: or = max, and = min (gloo: sum/max = or, product/min = and)
_BOOL_OPS = {"SUM": _lib.MAX, "MAX": _lib.MAX, "PRODUCT": _lib.MIN, "MIN": _lib.MIN}


def _op_name(reduce_op):
    op = getattr(reduce_op, "op", reduce_op)  # ReduceOp -> RedOpType
    name = getattr(op, "name", None)
    if name is None:
        name = str(op).rsplit(".", 1)[-1]
    return name


_premul_layout_ok = None


def _premul_factor_113(reduce_op):
    """torch 1.13 does not expose the PREMUL_SUM factor to Python.  Read it
    from the C++ object (pybind11 instance -> c10d::ReduceOp -> supplement_
    -> NCCLPreMulSumSupplement::double_factor), after checking the layout on
    probe objects whose contents we know; refuse if anything disagrees."""
    global _premul_layout_ok
    P = ctypes.c_void_p

    def value_ptr(o):
        return P.from_address(id(o) + 16).value  # simple_value_holder[0]

    def op_byte(o):
        return ctypes.c_uint8.from_address(value_ptr(o) + 24).value

    def supp(o):
        return P.from_address(value_ptr(o) + 32).value

    if _premul_layout_ok is None:
        ok = False
        try:
            if not torch.__version__.startswith("1."):
                raise RuntimeError("only torch 1.x lacks ReduceOp.__getstate__")
            R = _c10d.ReduceOp
            probes = [(R(R.RedOpType.SUM), 0), (R(R.RedOpType.MAX), 4), (R(R.RedOpType.AVG), 1)]
            if all(value_ptr(o) and op_byte(o) == v and supp(o) is None for o, v in probes):
                o = _c10d.AllreduceOptions()
                o.reduceOp = dist._make_nccl_premul_sum(0.8125)
                p = o.reduceOp  # the shim reads a copy held by an options object
                if op_byte(p) == 8 and supp(p):
                    ok = ctypes.c_double.from_address(supp(p) + 24).value == 0.8125
                    q = dist._make_nccl_premul_sum(-3.5)
                    ok = ok and ctypes.c_double.from_address(supp(q) + 24).value == -3.5
                    # undefined at::Tensor points at UndefinedTensorImpl's singleton
                    _premul_factor_113.undef = P.from_address(supp(p) + 32).value
                    ok = ok and _premul_factor_113.undef == P.from_address(supp(q) + 32).value
        except Exception:
            ok = False
        _premul_layout_ok = ok
    if not _premul_layout_ok:
        raise RuntimeError("coll: cannot read the PREMUL_SUM factor on this torch version")
    s = supp(reduce_op)
    if not s:
        raise RuntimeError("coll: PREMUL_SUM without a factor")
    if P.from_address(s + 32).value != _premul_factor_113.undef:
        raise RuntimeError("coll: PREMUL_SUM with a tensor factor is not supported on torch 1.13 (use a float factor)")
    return ctypes.c_double.from_address(s + 24).value


def _premul_factor(reduce_op):
    try:
        st = reduce_op.__getstate__()  # torch 2.x: (RedOpType, factor)
        if isinstance(st, tuple) and len(st) == 2 and st[1] is not None:
            return st[1]
    except Exception:
        pass
    return _premul_factor_113(reduce_op)


def _premul(t, factor):
    """t *= factor in t's dtype (as NCCL does: the factor is converted to the
    element type first, so integer tensors use the truncated factor)."""
    f = factor if isinstance(factor, torch.Tensor) else torch.tensor(factor)
    if not t.dtype.is_complex:
        f = f.real if f.is_complex() else f
    return t.mul_(f.to(t.dtype))


def _reduction(t, reduce_op, what):
    """-> (coll dtype, coll op, element count, premul factor or None)."""
    name = _op_name(reduce_op)
    dt = t.dtype
    factor = None
    if name in ("BAND", "BOR", "BXOR"):
        raise RuntimeError("coll: %s: ReduceOp.%s is not supported (coll has no bitwise reductions)" % (what, name))
    if name == "PREMUL_SUM":
        factor = _premul_factor(reduce_op)
        name = "SUM"
    if name not in _OPS:
        raise RuntimeError("coll: %s: unsupported reduce op %s" % (what, name))
    if dt in _COMPLEX_REAL:
        if name not in ("SUM", "AVG"):
            raise RuntimeError("coll: %s: ReduceOp.%s is not defined for complex tensors (only SUM, AVG, PREMUL_SUM)"
                               % (what, name))
        return _COMPLEX_REAL[dt], _OPS[name], 2 * t.numel(), factor
    if dt == torch.bool:
        if name not in _BOOL_OPS or factor is not None:
            raise RuntimeError("coll: %s: ReduceOp.%s is not supported for bool tensors (SUM/MAX = or, "
                               "PRODUCT/MIN = and)" % (what, "PREMUL_SUM" if factor is not None else name))
        return _lib.UINT8, _BOOL_OPS[name], t.numel(), None
    if dt not in _RED_TYPES:
        raise RuntimeError("coll: %s: dtype %s cannot be reduced by coll (supported: %s, bool, complex)"
                           % (what, dt, ", ".join(sorted(str(d).replace("torch.", "") for d in _RED_TYPES
                                                         if d != torch.bool))))
    return _RED_TYPES[dt], _OPS[name], t.numel(), factor


# ---------------------------------------------------------------------------
# tensors


def _plain(t):
    return t.is_contiguous() and not t.is_conj() and not (hasattr(t, "is_neg") and t.is_neg())


def _check_tensor(t, what):
    if not isinstance(t, torch.Tensor):
        raise TypeError("coll: %s: expected a tensor, got %r" % (what, type(t)))
    if t.device.type != "cpu":
        raise RuntimeError("coll: %s: only CPU tensors are supported (got %s)" % (what, t.device))
    if t.layout != torch.strided:
        raise RuntimeError("coll: %s: only dense (strided) tensors are supported (got %s)" % (what, t.layout))


def _plain_copy(t):
    if hasattr(t, "resolve_neg"):
        t = t.resolve_conj().resolve_neg()
    return t.contiguous()


def _ptr(t):
    return t.data_ptr() if t.numel() else None


def _nbytes(t):
    return t.numel() * t.element_size()


class _Outs:
    """Output buffers: a plain tensor is written directly, others go through a
    contiguous staging tensor copied back when the operation completed.  Holds
    the engine's quiesce (not the group: its finish() is queued with the work)."""

    def __init__(self, pg):
        self.quiesce = pg._eng.quiesce
        self.copies = []

    def buf(self, t, what, init=False):
        _check_tensor(t, what)
        if _plain(t):
            return t
        b = torch.empty(t.shape, dtype=t.dtype)
        if init:
            self.quiesce()
            b.copy_(t)
        self.copies.append((t, b))
        return b

    def finish(self):
        for t, b in self.copies:
            t.copy_(b)


# ---------------------------------------------------------------------------
# the engine: one coll stream and one completion thread per process group

# Completed Work objects are kept alive a little longer: on torch < 2.14 a
# Python Work whose Python object died can no longer be waited on from C++
# (the trampoline falls back to c10d::Work::wait, which never returns), and C++
# callers (DDP's reducer, _broadcast_coalesced) may call wait()/get_future()
# after we completed the future.  They do so promptly, so a short retention
# suffices.


def _any_source_enabled():  # read when a group is created
    return os.environ.get("COLL_TORCH_ANY_SOURCE", "0") not in ("", "0")


_RETAIN_COUNT = 64
_RETAIN_SECONDS = 5.0


class _Item:
    __slots__ = ("futs", "finalize", "keep", "works", "err")

    def __init__(self, futs, finalize, keep, err=None):
        self.futs = futs  # [(future, result)]
        self.finalize = finalize
        self.keep = keep  # buffers coll reads/writes: alive until completion
        self.works = []
        self.err = err  # failed at issue: complete with this error


class CollWork(_c10d.Work):
    """Work of the coll backend: wait() raises the operation's error."""

    def __init__(self, fut):
        _c10d.Work.__init__(self)
        self._fut = fut  # nothing else: a Work the user keeps must not keep the group alive

    def wait(self, timeout=None):
        secs = 0.0
        if timeout is not None:
            secs = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
        if secs > 0 and not self._fut.done():  # 0 means no timeout, as in c10d
            ev = threading.Event()
            self._fut.add_done_callback(lambda f: ev.set())
            if not ev.wait(secs):
                raise RuntimeError("coll: Work.wait() timed out after %.3f s (the operation goes on)" % secs)
        self._fut.wait()  # raises the RuntimeError the operation failed with
        return True

    def get_future(self):
        return self._fut

    def is_completed(self):
        return self._fut.done()

    def is_success(self):
        if not self._fut.done():
            raise RuntimeError("coll: is_success() on a Work that has not completed")
        try:
            self._fut.value()
            return True
        except Exception:
            return False

    def exception(self):
        if not self._fut.done():
            return None
        try:
            self._fut.value()
            return None
        except Exception as e:
            return e

    def result(self):
        self.wait()
        v = self._fut.value()
        return list(v) if isinstance(v, (list, tuple)) else [v]

    def synchronize(self):
        pass

    _src_rank = None

    def source_rank(self):
        if self._src_rank is None:
            raise RuntimeError("coll: source_rank() is only defined for a receive from any source")
        return self._src_rank

    _source_rank = source_rank

    def abort(self):
        raise RuntimeError("coll: aborting a single operation is not supported")


class _Engine:
    """Owns the communicator and its stream.  The completion thread holds only
    a weak proxy of it, so the process group can be garbage-collected and shut
    the engine down."""

    def __init__(self, comm, rank, size, store=None, gen=0):
        self.comm = comm
        self.store = store  # for the point-to-point channels' rendezvous
        self.gen = gen
        self.channels = {}  # (src, dst) -> _Channel
        self.rank = rank
        self.size = size
        self.stream = _lib.stream_create(comm)
        self.cond = threading.Condition()
        self.issue_lock = threading.RLock()
        self.pending = collections.deque()
        self.stop = False
        self.error = None  # message of the first failure: later calls fail at once
        self.closed = False
        self.inflight = 0  # submitted, not yet completed
        self.retained = collections.deque()  # (time completed, [works])
        self.timeout_sec = None
        self.rendezvous_watch = None  # see _rendezvous_watch
        self.thread = threading.Thread(target=_Engine._run, args=(weakref.proxy(self), self.cond, self.pending),
                                       name="coll-completion-r%d" % rank, daemon=True)
        self.thread.start()
        _live_engines.add(self)

    def _check_open(self):
        if self.closed:
            raise RuntimeError("coll: the process group was destroyed")
        if self.error is not None:
            raise RuntimeError(self.error)

    # -- issuing
    def submit(self, issue, futs, finalize=None, keep=None, group=False, works=(), raise_errors=True):
        """Issues one item (issue() makes the coll calls) after any deferred
        point-to-point work."""
        with self.issue_lock:
            self._check_open()
            self._submit_locked(issue, futs, finalize, keep, group, raise_errors, works)

    def _submit_locked(self, issue, futs, finalize, keep, group, raise_errors, works):
        err = None
        if group:
            _lib.lib.collGroupStart()
        try:
            issue()
        except Exception as e:
            err = e
        if group:
            r = _lib.lib.collGroupEnd()
            if r != _lib.SUCCESS and err is None:
                err = CollError(r, _lib.message(r, "collGroupEnd"))
        if err is not None and raise_errors:
            futs = []  # the caller gets the exception; no Work exists
        item = _Item(futs, finalize, keep, None if err is None else str(err))
        item.works = list(works)
        with self.cond:
            # even a failed issue keeps its buffers alive until the stream drained
            self.pending.append(item)
            self.inflight += 1
            self.cond.notify_all()
        if err is not None and raise_errors:
            raise err

    def channel(self, src, dst):
        with self.issue_lock:
            self._check_open()
            ch = self.channels.get((src, dst))
            if ch is None:
                ch = self.channels[(src, dst)] = _Channel(self, src, dst)
            return ch

    @staticmethod
    def _run(eng, cond, pending):
        try:
            stream = eng.stream
            while True:
                with cond:
                    while not pending and not eng.stop:
                        cond.wait()
                    if not pending and eng.stop:
                        return
                    n = len(pending)
                if any(it.err is None for it in list(pending)[:n]):
                    r = _lib.lib.collStreamSynchronize(stream)
                else:
                    r = _lib.SUCCESS
                err = None
                if r != _lib.SUCCESS:
                    err = _lib.message(r, "operation on process group rank %d" % eng.rank)
                    eng.error = err
                with cond:
                    items = [pending.popleft() for _ in range(n)]
                for it in items:
                    _complete(it, err or it.err)
                    if it.works:
                        eng.retain(it.works)
                    it.works = None
                # drop this frame's references before waiting again: the last items hold
                # finishing steps, buffers and futures, which must not outlive the group
                items = it = None
                with cond:
                    eng.inflight -= n
                    cond.notify_all()
        except ReferenceError:  # the engine is gone
            return

    def retain(self, works):
        now = time.monotonic()
        with self.cond:
            self.retained.append((now, works))
            ret = self.retained
            while len(ret) > _RETAIN_COUNT and now - ret[0][0] > _RETAIN_SECONDS:
                ret.popleft()

    def quiesce(self):
        """Waits until every operation submitted so far completed (not from
        the completion thread itself, which would wait for itself)."""
        if threading.current_thread() is self.thread:
            return
        with self.cond:
            while self.inflight:
                self.cond.wait()

    def close(self, timeout=30.0, wait_rendezvous=True):
        """Stops the threads and frees the stream and the communicator.  With
        wait_rendezvous (not at interpreter exit), see _wait_rendezvous_closed."""
        with self.issue_lock:
            if self.closed:
                return
            self.closed = True
        if not wait_rendezvous and self.rendezvous_watch is not None:
            self.rendezvous_watch.close()
            self.rendezvous_watch = None
        me = threading.current_thread()
        if me is self.thread or any(me is ch.thread for ch in self.channels.values()):
            # the group was dropped from one of our own threads (a future's callback): finish
            # elsewhere, as that thread must leave coll before its stream and comm are freed
            threading.Thread(target=self._finish_close, args=(timeout,), daemon=True).start()
        else:
            self._finish_close(timeout)

    def _finish_close(self, timeout):
        for ch in list(self.channels.values()):
            ch.close(timeout)
        with self.cond:
            self.stop = True
            self.cond.notify_all()
        self.thread.join(timeout)
        if self.thread.is_alive():
            return  # something is stuck inside coll: leak rather than free under it
        _live_engines.discard(self)
        self.retained.clear()
        self.store = None  # torch's store (with init_method, its TCPStore server on rank 0) goes with the group
        self.channels.clear()
        _lib.lib.collStreamDestroy(self.stream)
        ae = _lib.async_error(self.comm)
        if ae not in (None, _lib.SUCCESS, _lib.IN_PROGRESS):
            _lib.lib.collCommAbort(self.comm)
        else:
            _lib.lib.collCommDestroy(self.comm)
        self.comm = None
        watch, self.rendezvous_watch = self.rendezvous_watch, None
        if watch is not None:
            _wait_rendezvous_closed(watch, min(_RENDEZVOUS_WAIT_SECONDS, self.timeout_sec or _RENDEZVOUS_WAIT_SECONDS))


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


def _complete(it, err):
    if err is None and it.finalize is not None:
        try:
            it.finalize()
        except Exception as e:  # pragma: no cover
            err = "coll: finishing the operation failed: %r" % (e,)
    for fut, result in it.futs:
        if err is None:
            fut.set_result(result)
        else:
            fut.set_exception(RuntimeError(err))


_live_engines = weakref.WeakSet()


def _close_all():  # atexit: stop the completion threads before the interpreter goes
    for e in list(_live_engines):
        try:
            e.close(timeout=5.0, wait_rendezvous=False)
        except Exception:
            pass

import atexit  # noqa: E402

atexit.register(_close_all)

# ---------------------------------------------------------------------------
# the process group


def _opt(opts, name, default):
    return getattr(opts, name, default) if opts is not None else default


def _flat(lists):
    out = []
    for x in lists:
        if isinstance(x, (list, tuple)):
            out.extend(_flat(x))
        else:
            out.append(x)
    return out


class ProcessGroupColl(_ProcessGroup):
    """torch.distributed process group over a libcoll communicator."""

    def __init__(self, engine, rank, size):
        _ProcessGroup.__init__(self, rank, size)
        self._eng = engine
        self._rank = rank
        self._size = size
        self._group_name = None
        self._group_desc = None
        self._batch = None
        self._any_source = _any_source_enabled()
        self._any_lock = threading.RLock()
        self._monitored = 0  # monitored barriers so far (their store keys)
        self._any_cursor = 0  # announcements read (see recv_anysource)
        self._announced = []  # their sources, in order
        self._claimed = {}  # source -> messages claimed by receives

    def __del__(self):
        e = getattr(self, "_eng", None)
        if e is not None:
            try:
                e.close()
            except Exception:
                pass

    # -- identity (1.13 requires getBackendName, 2.x the group name/desc)
    def getBackendName(self):
        return BACKEND_NAME

    def _get_backend_name(self):
        return BACKEND_NAME

    # torch 2.x lists the devices of a group's registered backends here; a
    # Python ProcessGroup is the group itself and registers none, so torch
    # would see no device (monitored_barrier then refuses the group, object
    # collectives find no default device). coll runs on CPU tensors.
    @property
    def _device_types(self):
        return [torch.device("cpu")]

    def setGroupName(self, name):
        self._group_name = name

    def getGroupName(self):
        return self._group_name if self._group_name is not None else ""

    def _set_group_name(self, name):
        self._group_name = name

    @property
    def group_name(self):
        return self.getGroupName()

    def setGroupDesc(self, desc):
        self._group_desc = desc

    def getGroupDesc(self):
        return self._group_desc if self._group_desc is not None else ""

    def _set_group_desc(self, desc):
        self._group_desc = desc

    @property
    def group_desc(self):
        return self.getGroupDesc()

    # torch 2.x asks the group for its per-device backend (e.g. batch_isend_irecv:
    # group._get_backend(device).supports_coalescing); this group is its own backend
    # for every device.  No coalescing needed: sends and receives never block each other.
    supports_coalescing = False

    def _get_backend(self, device=None):
        return self

    def shutdown(self):
        if self._eng is not None:
            self._eng.close()

    # -- plumbing
    def _submit(self, issue, result, finalize=None, keep=None, group=False):
        fut = torch.futures.Future()
        work = CollWork(fut)
        self._eng.submit(issue, [(fut, result)], finalize, keep, group, [work])
        return work

    def _p2p(self, src, dst, buf, result, finalize):
        fut = torch.futures.Future()
        work = CollWork(fut)
        if self._batch is not None:
            self._batch.append(fut)
        self._eng.channel(src, dst).put(buf, _nbytes(buf), fut, result, finalize, work)
        return work

    def _one(self, tensors, what):
        if not isinstance(tensors, (list, tuple)) or len(tensors) != 1:
            raise RuntimeError("coll: %s: expects a list of exactly one tensor per process (got %s)"
                               % (what, len(tensors) if isinstance(tensors, (list, tuple)) else type(tensors)))
        return tensors[0]

    def _comm(self):
        return self._eng.comm

    def _src(self, t, what):
        """A plain (contiguous, no conj/neg bit) tensor holding t's values.  A
        copy is made only after earlier operations of this group completed, so
        it sees what they wrote (as stream order would)."""
        _check_tensor(t, what)
        if _plain(t):
            return t
        self._eng.quiesce()
        return _plain_copy(t)

    # -- all-reduce
    def _issue_allreduce(self, t, reduce_op, what, outs, keep, post):
        ctype, cop, count, factor = _reduction(t, reduce_op, what)
        buf = outs.buf(t, what, init=True)
        if factor is not None:
            self._eng.quiesce()
            _premul(buf, factor)
        comm, stream = self._comm(), self._eng.stream
        keep.append(buf)

        def issue():
            _lib.check(_lib.lib.collAllReduce(_ptr(buf), _ptr(buf), count, ctype, cop, comm, stream), what)
        return issue

    def allreduce(self, tensors, opts=None):
        t = self._one(tensors, "allreduce")
        op = _opt(opts, "reduceOp", dist.ReduceOp.SUM)
        if isinstance(t, torch.Tensor) and t.layout == torch.sparse_coo:
            return self._sparse_allreduce(t, op)
        outs, keep = _Outs(self), []
        issue = self._issue_allreduce(t, op, "allreduce", outs, keep, None)
        return self._submit(issue, list(tensors), outs.finish, keep)

    def allreduce_sparse(self, tensors, opts=None):  # torch 2.x routes sparse tensors here
        return self._sparse_allreduce(self._one(tensors, "allreduce_sparse"),
                                      _opt(opts, "reduceOp", dist.ReduceOp.SUM))

    def _sparse_allreduce(self, t, op):
        """SUM of sparse COO tensors, as gloo does it: every rank's indices and
        values are all-gathered (padded to the largest nnz), then summed
        (coalesced) and copied into t.  Synchronous: the Work returned is done."""
        what = "allreduce (sparse)"
        if _op_name(op) != "SUM":
            raise RuntimeError("coll: %s: only SUM is supported for sparse tensors (got %s)" % (what, _op_name(op)))
        if t.device.type != "cpu":
            raise RuntimeError("coll: %s: only CPU tensors are supported (got %s)" % (what, t.device))
        src = t.coalesce()
        idx, val = src._indices().contiguous(), src._values().contiguous()
        nnz = torch.tensor([idx.shape[1]], dtype=torch.int64)
        nnzs = [torch.zeros(1, dtype=torch.int64) for _ in range(self._size)]
        self.allgather([nnzs], [nnz]).wait()
        counts = [int(n.item()) for n in nnzs]
        m = max(counts)
        pidx = torch.zeros((idx.shape[0], m), dtype=idx.dtype)
        pidx[:, :idx.shape[1]] = idx
        pval = torch.zeros((m,) + tuple(val.shape[1:]), dtype=val.dtype)
        pval[:val.shape[0]] = val
        gidx = [torch.empty_like(pidx) for _ in range(self._size)]
        gval = [torch.empty_like(pval) for _ in range(self._size)]
        self.allgather([gidx], [pidx]).wait()
        self.allgather([gval], [pval]).wait()
        all_idx = torch.cat([g[:, :n] for g, n in zip(gidx, counts)], dim=1)
        all_val = torch.cat([g[:n] for g, n in zip(gval, counts)], dim=0)
        out = torch.sparse_coo_tensor(all_idx, all_val, t.shape, dtype=t.dtype).coalesce()
        t.copy_(out)
        fut = torch.futures.Future()
        fut.set_result([t])
        return CollWork(fut)

    def allreduce_coalesced(self, tensors, opts=None):
        op = _opt(opts, "reduceOp", dist.ReduceOp.SUM)
        outs, keep = _Outs(self), []
        issues = [self._issue_allreduce(t, op, "allreduce_coalesced", outs, keep, None) for t in tensors]

        def issue():
            for f in issues:
                f()
        return self._submit(issue, list(tensors), outs.finish, keep)

    # -- broadcast
    def broadcast(self, tensors, opts=None):
        t = self._one(tensors, "broadcast")
        root = _opt(opts, "rootRank", 0)
        self._check_rank(root, "broadcast root")
        outs = _Outs(self)
        buf = outs.buf(t, "broadcast", init=(root == self._rank))
        comm, stream, n = self._comm(), self._eng.stream, _nbytes(buf)

        def issue():
            _lib.check(_lib.lib.collBroadcast(_ptr(buf), _ptr(buf), n, _lib.UINT8, root, comm, stream), "broadcast")
        return self._submit(issue, list(tensors), outs.finish, [buf])

    def _check_rank(self, r, what):
        if not isinstance(r, int) or r < 0 or r >= self._size:
            raise RuntimeError("coll: %s %r is out of range [0, %d)" % (what, r, self._size))

    # -- all-gather
    def _gather_into(self, out, inp, what, outs, keep):
        """out (flat, ws * inp bytes) = all-gather of inp."""
        src = self._src(inp, what)
        _check_tensor(out, what)
        if _nbytes(out) != self._size * _nbytes(src):
            raise RuntimeError("coll: %s: output has %d bytes, expected world size %d x %d input bytes"
                               % (what, _nbytes(out), self._size, _nbytes(src)))
        if out.dtype != src.dtype:
            raise RuntimeError("coll: %s: output dtype %s differs from input dtype %s" % (what, out.dtype, src.dtype))
        buf = outs.buf(out, what)
        keep += [src, buf]
        comm, stream, n = self._comm(), self._eng.stream, _nbytes(src)

        def issue():
            _lib.check(_lib.lib.collAllGather(_ptr(src), _ptr(buf), n, _lib.UINT8, comm, stream), what)
        return issue

    def _allgather_base(self, output, input, opts=None):
        outs, keep = _Outs(self), []
        issue = self._gather_into(output, input, "all_gather_into_tensor", outs, keep)
        return self._submit(issue, [output], outs.finish, keep)

    all_gather_single = _allgather_base

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        outs, keep = _Outs(self), []
        issues = [self._gather_into(o, i, "allgather_into_tensor_coalesced", outs, keep)
                  for o, i in zip(outputs, inputs)]

        def issue():
            for f in issues:
                f()
        return self._submit(issue, list(outputs), outs.finish, keep)

    all_gather_single_coalesced = allgather_into_tensor_coalesced

    def _allgather_lists(self, output_lists, inputs, what):
        """outputs[r][i] = inputs[i] of rank r, through one byte all-gather of
        the packed inputs."""
        srcs = [self._src(t, what) for t in inputs]
        sizes = [_nbytes(s) for s in srcs]
        if len(output_lists) != self._size:
            raise RuntimeError("coll: %s: %d output lists for world size %d" % (what, len(output_lists), self._size))
        for r, lst in enumerate(output_lists):
            if len(lst) != len(srcs):
                raise RuntimeError("coll: %s: output list %d has %d tensors, expected %d" % (what, r, len(lst), len(srcs)))
            for o, s in zip(lst, srcs):
                _check_tensor(o, what)
                if _nbytes(o) != _nbytes(s) or o.dtype != s.dtype:
                    raise RuntimeError("coll: %s: output tensor %s/%s does not match input %s/%s"
                                       % (what, tuple(o.shape), o.dtype, tuple(s.shape), s.dtype))
        total = sum(sizes)
        self._eng.quiesce()
        packed = torch.empty(total, dtype=torch.uint8)
        off = 0
        for s, n in zip(srcs, sizes):
            if n:
                packed[off:off + n].copy_(s.reshape(-1).view(torch.uint8) if s.dim() else
                                          s.reshape(1).view(torch.uint8))
            off += n
        gathered = torch.empty(total * self._size, dtype=torch.uint8)
        comm, stream = self._comm(), self._eng.stream

        def issue():
            _lib.check(_lib.lib.collAllGather(_ptr(packed), _ptr(gathered), total, _lib.UINT8, comm, stream), what)

        def finalize():
            for r, lst in enumerate(output_lists):
                off = r * total
                for o, n in zip(lst, sizes):
                    if n:
                        o.copy_(gathered[off:off + n].view(o.dtype).view(o.shape))
                    off += n
        return issue, finalize, [packed, gathered]

    def allgather(self, output_tensors, input_tensors, opts=None):
        inp = self._one(input_tensors, "allgather")
        outl = self._one(output_tensors, "allgather")
        issue, fin, keep = self._allgather_lists([[o] for o in outl], [inp], "allgather")
        return self._submit(issue, _flat(output_tensors), fin, keep)

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        issue, fin, keep = self._allgather_lists(output_lists, list(input_list), "allgather_coalesced")
        return self._submit(issue, _flat(output_lists), fin, keep)

    # -- reduce-scatter
    def _rs_into(self, out, inp, reduce_op, what, outs, keep):
        src = self._src(inp, what)
        _check_tensor(out, what)
        if src.numel() != self._size * out.numel() or src.dtype != out.dtype:
            raise RuntimeError("coll: %s: input %s/%s must hold world size %d x output %s/%s"
                               % (what, tuple(src.shape), src.dtype, self._size, tuple(out.shape), out.dtype))
        ctype, cop, count, factor = _reduction(out, reduce_op, what)
        if factor is not None:
            self._eng.quiesce()
            src = _premul(src.clone(), factor)
        buf = outs.buf(out, what)
        keep += [src, buf]
        comm, stream = self._comm(), self._eng.stream

        def issue():
            _lib.check(_lib.lib.collReduceScatter(_ptr(src), _ptr(buf), count, ctype, cop, comm, stream), what)
        return issue

    def _reduce_scatter_base(self, output, input, opts=None):
        op = _opt(opts, "reduceOp", dist.ReduceOp.SUM)
        outs, keep = _Outs(self), []
        issue = self._rs_into(output, input, op, "reduce_scatter_tensor", outs, keep)
        return self._submit(issue, [output], outs.finish, keep)

    reduce_scatter_single = _reduce_scatter_base

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        op = _opt(opts, "reduceOp", dist.ReduceOp.SUM)
        outs, keep = _Outs(self), []
        issues = [self._rs_into(o, i, op, "reduce_scatter_tensor_coalesced", outs, keep)
                  for o, i in zip(outputs, inputs)]

        def issue():
            for f in issues:
                f()
        return self._submit(issue, list(outputs), outs.finish, keep)

    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced

    def reduce_scatter(self, output_tensors, input_lists, opts=None):
        out = self._one(output_tensors, "reduce_scatter")
        lst = self._one(input_lists, "reduce_scatter")
        if len(lst) != self._size:
            raise RuntimeError("coll: reduce_scatter: %d inputs for world size %d" % (len(lst), self._size))
        for t in lst:
            _check_tensor(t, "reduce_scatter")
            if t.numel() != out.numel() or t.dtype != out.dtype:
                raise RuntimeError("coll: reduce_scatter: every input must match the output's size and dtype")
        packed = torch.empty((self._size * out.numel(),), dtype=out.dtype)
        self._eng.quiesce()
        if out.numel():
            for r, t in enumerate(lst):
                packed[r * out.numel():(r + 1) * out.numel()].copy_(t.reshape(-1))
        return self._reduce_scatter_base(out, packed, opts)

    # -- reduce
    def reduce(self, tensors, opts=None):
        t = self._one(tensors, "reduce")
        root = _opt(opts, "rootRank", 0)
        self._check_rank(root, "reduce root")
        op = _opt(opts, "reduceOp", dist.ReduceOp.SUM)
        ctype, cop, count, factor = _reduction(t, op, "reduce")
        outs = _Outs(self)
        if root == self._rank:
            buf = outs.buf(t, "reduce", init=True)
            if factor is not None:
                self._eng.quiesce()
                _premul(buf, factor)
            src = buf
        else:
            src = self._src(t, "reduce")
            if factor is not None:
                self._eng.quiesce()
                src = _premul(src.clone(), factor)
            buf = src
        comm, stream = self._comm(), self._eng.stream

        def issue():
            _lib.check(_lib.lib.collReduce(_ptr(src), _ptr(buf), count, ctype, cop, root, comm, stream), "reduce")
        return self._submit(issue, list(tensors), outs.finish, [src, buf])

    # -- barrier: queued behind everything issued before it on this group
    def barrier(self, opts=None):
        comm, stream = self._comm(), self._eng.stream

        def issue():
            _lib.check(_lib.lib.collBarrier(comm, stream), "barrier")
        return self._submit(issue, [])

    # -- point to point: one channel (two-rank communicator + thread) per direction, see _Channel.
    # Messages of one direction are matched in order; tags are not used.
    def send(self, tensors, dstRank, tag=0):
        t = self._one(tensors, "send")
        self._check_rank(dstRank, "send destination")
        if dstRank == self._rank:
            raise RuntimeError("coll: send to self is not supported")
        src = self._src(t, "send")
        if not self._any_source:
            return self._p2p(self._rank, dstRank, src, list(tensors), None)
        with self._any_lock:  # the announcement order per destination = the channel's order
            self._announce(dstRank)
            return self._p2p(self._rank, dstRank, src, list(tensors), None)

    def recv(self, tensors, srcRank, tag=0):
        t = self._one(tensors, "recv")
        self._check_rank(srcRank, "recv source")
        if srcRank == self._rank:
            raise RuntimeError("coll: receive from self is not supported")
        outs = _Outs(self)
        buf = outs.buf(t, "recv")
        if self._any_source:
            with self._any_lock:
                self._claimed[srcRank] = self._claimed.get(srcRank, 0) + 1
        return self._p2p(srcRank, self._rank, buf, list(tensors), outs.finish if outs.copies else None)

    # Receive from any source (opt-in, COLL_TORCH_ANY_SOURCE=1 on every rank): coll has no any-source
    # receive, so every send first announces itself through the group's store (one add and one set per
    # send): announcement n for destination d names its source.  Sources' messages are numbered in
    # channel order, so a receive from any source takes the earliest announced message that no
    # receive has claimed yet, and receives it on that source's channel.  It blocks until a message
    # to this rank has been announced.
    def _announce(self, dst):
        e = self._eng
        base = "torch_coll/any/%d/%d/" % (e.gen, dst)
        n = e.store.add(base + "count", 1)
        e.store.set(base + str(n), str(self._rank))
        e.store.add(base + "done", 1)

    def recv_anysource(self, tensors, tag=0):
        if not self._any_source:
            raise RuntimeError("coll: recv from any source (dist.recv/irecv with src=None) needs "
                               "COLL_TORCH_ANY_SOURCE=1 on every rank (coll has no any-source receive; then "
                               "every send announces itself through the store); or pass src")
        t = self._one(tensors, "recv")
        outs = _Outs(self)
        buf = outs.buf(t, "recv")
        e = self._eng
        with self._any_lock:
            while True:
                seen = {}
                src = None
                for s_ in self._announced:  # announcement order; k-th announcement of s_ = its k-th message
                    k = seen.get(s_, 0)
                    seen[s_] = k + 1
                    if k >= self._claimed.get(s_, 0):
                        src = s_
                        break
                if src is not None:
                    break
                self._any_cursor += 1
                base = "torch_coll/any/%d/%d/" % (e.gen, self._rank)
                n = self._any_cursor
                # the sender sets the key, then bumps "done": poll that counter (see _store_get_when_counted)
                val = _store_get_when_counted(e.store, base + "done", n, base + str(n),
                                              getattr(e, "timeout_sec", None), "a message to receive from any source")
                self._announced.append(int(val.decode()))
            self._claimed[src] = self._claimed.get(src, 0) + 1
        work = self._p2p(src, self._rank, buf, list(tensors), outs.finish if outs.copies else None)
        work._src_rank = src
        return work

    recvAnysource = recv_anysource

    # batch_isend_irecv (1.13 calls _start_coalescing(); ...; _end_coalescing(reqs), 2.x passes a device).
    # The sends and receives run independently anyway; the Work returned by _end_coalescing completes
    # when all of them did.
    def _start_coalescing(self, *args, **kwargs):
        self._batch = []

    start_coalescing = _start_coalescing

    def _end_coalescing(self, *args, **kwargs):
        futs, self._batch = self._batch or [], None
        agg = torch.futures.Future()
        work = CollWork(agg)
        if not futs:
            agg.set_result([])
            return work

        def done(all_f):
            try:
                for f in all_f.value():
                    f.value()  # raises the first error
                agg.set_result([])
            except Exception as e:
                agg.set_exception(e if isinstance(e, RuntimeError) else RuntimeError(str(e)))
        torch.futures.collect_all(futs).add_done_callback(done)
        self._eng.retain([work])
        return work

    end_coalescing = _end_coalescing

    # -- gather / scatter: groups of sends and receives
    def gather(self, output_lists, input_tensors, opts=None):
        inp = self._one(input_tensors, "gather")
        root = _opt(opts, "rootRank", 0)
        self._check_rank(root, "gather root")
        src = self._src(inp, "gather")
        comm, stream, n = self._comm(), self._eng.stream, _nbytes(src)
        outs = _Outs(self)
        if self._rank == root:
            outl = self._one(output_lists, "gather")
            if len(outl) != self._size:
                raise RuntimeError("coll: gather: %d outputs for world size %d" % (len(outl), self._size))
            bufs = []
            for o in outl:
                if _nbytes(o) != n or o.dtype != src.dtype:
                    raise RuntimeError("coll: gather: output %s/%s does not match input %s/%s"
                                       % (tuple(o.shape), o.dtype, tuple(src.shape), src.dtype))
                bufs.append(outs.buf(o, "gather"))
            me = self._rank

            def issue():
                for r in range(self._size):
                    if r != me and n:
                        _lib.check(_lib.lib.collRecv(_ptr(bufs[r]), n, _lib.UINT8, r, comm, stream), "gather")

            def finalize():
                bufs[me].copy_(src.view(bufs[me].shape) if src.shape != bufs[me].shape else src)
                outs.finish()
            return self._submit(issue, _flat(output_lists), finalize, bufs + [src], group=True)
        if output_lists and any(len(x) for x in output_lists):
            raise RuntimeError("coll: gather: only the root passes output tensors")

        def issue():
            if n:
                _lib.check(_lib.lib.collSend(_ptr(src), n, _lib.UINT8, root, comm, stream), "gather")
        return self._submit(issue, [], None, [src], group=True)

    def gather_single(self, output, input, opts=None):
        root = _opt(opts, "rootRank", 0)
        if self._rank == root:
            chunks = list(output.reshape(-1).chunk(self._size)) if output.numel() else \
                [output.reshape(-1)] * self._size
            chunks = [c.view(input.shape) for c in chunks]
            return self.gather([chunks], [input], opts)
        return self.gather([], [input], opts)

    def scatter(self, output_tensors, input_lists, opts=None):
        out = self._one(output_tensors, "scatter")
        root = _opt(opts, "rootRank", 0)
        self._check_rank(root, "scatter root")
        outs = _Outs(self)
        buf = outs.buf(out, "scatter")
        comm, stream, n = self._comm(), self._eng.stream, _nbytes(buf)
        if self._rank == root:
            inl = self._one(input_lists, "scatter")
            if len(inl) != self._size:
                raise RuntimeError("coll: scatter: %d inputs for world size %d" % (len(inl), self._size))
            srcs = [self._src(t, "scatter") for t in inl]
            for s in srcs:
                if _nbytes(s) != n or s.dtype != out.dtype:
                    raise RuntimeError("coll: scatter: input %s/%s does not match output %s/%s"
                                       % (tuple(s.shape), s.dtype, tuple(out.shape), out.dtype))
            me = self._rank

            def issue():
                for r in range(self._size):
                    if r != me and n:
                        _lib.check(_lib.lib.collSend(_ptr(srcs[r]), n, _lib.UINT8, r, comm, stream), "scatter")

            def finalize():
                buf.copy_(srcs[me].view(buf.shape) if srcs[me].shape != buf.shape else srcs[me])
                outs.finish()
            return self._submit(issue, list(output_tensors), finalize, srcs + [buf], group=True)
        if input_lists and any(len(x) for x in input_lists):
            raise RuntimeError("coll: scatter: only the root passes input tensors")

        def issue():
            if n:
                _lib.check(_lib.lib.collRecv(_ptr(buf), n, _lib.UINT8, root, comm, stream), "scatter")
        return self._submit(issue, list(output_tensors), outs.finish, [buf], group=True)

    # -- all-to-all: a group of sends and receives, the local block copied
    def _alltoall_issue(self, sends, recvs, what):
        """sends/recvs: per peer a byte view (1-D uint8 tensor) or None."""
        comm, stream, me = self._comm(), self._eng.stream, self._rank

        def issue():
            for r in range(self._size):
                if r == me:
                    continue
                s, d = sends[r], recvs[r]
                if s is not None and s.numel():
                    _lib.check(_lib.lib.collSend(_ptr(s), s.numel(), _lib.UINT8, r, comm, stream), what)
                if d is not None and d.numel():
                    _lib.check(_lib.lib.collRecv(_ptr(d), d.numel(), _lib.UINT8, r, comm, stream), what)
        return issue

    @staticmethod
    def _bytes(t):
        """1-D uint8 view of a plain tensor's bytes."""
        if t.numel() == 0:
            return torch.empty(0, dtype=torch.uint8)
        flat = t.reshape(-1)
        return flat.view(torch.uint8) if t.element_size() != 1 or t.dtype != torch.uint8 else flat

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        what = "all_to_all_single"
        src = self._src(input, what)
        _check_tensor(output, what)
        if src.dtype != output.dtype:
            raise RuntimeError("coll: %s: input dtype %s differs from output dtype %s" % (what, src.dtype, output.dtype))
        outs = _Outs(self)
        buf = outs.buf(output, what)
        ws, me = self._size, self._rank

        def splits(t, given, name):
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
        so = splits(src, list(input_split_sizes), "input")
        ro = splits(buf, list(output_split_sizes), "output")
        sb, rb = self._bytes(src), self._bytes(buf)
        sends = [sb[o:o + n] for o, n in so]
        recvs = [rb[o:o + n] for o, n in ro]
        if sends[me].numel() != recvs[me].numel():
            raise RuntimeError("coll: %s: this rank sends %d bytes to itself but expects %d"
                               % (what, sends[me].numel(), recvs[me].numel()))

        def finalize():
            recvs[me].copy_(sends[me])
            outs.finish()
        return self._submit(self._alltoall_issue(sends, recvs, what), [output], finalize, [src, buf], group=True)

    all_to_all_single = alltoall_base

    def alltoall(self, output_tensors, input_tensors, opts=None):
        what = "all_to_all"
        ws, me = self._size, self._rank
        if len(output_tensors) != ws or len(input_tensors) != ws:
            raise RuntimeError("coll: %s: needs %d input and output tensors" % (what, ws))
        outs = _Outs(self)
        srcs = [self._src(t, what) for t in input_tensors]
        bufs = [outs.buf(t, what) for t in output_tensors]
        for s, b in zip(srcs, bufs):
            if s.dtype != b.dtype:
                raise RuntimeError("coll: %s: input and output dtypes differ" % what)
        sends = [self._bytes(s) for s in srcs]
        recvs = [self._bytes(b) for b in bufs]
        if sends[me].numel() != recvs[me].numel():
            raise RuntimeError("coll: %s: input %d and output %d differ in size" % (what, me, me))

        def finalize():
            recvs[me].copy_(sends[me])
            outs.finish()
        return self._submit(self._alltoall_issue(sends, recvs, what), list(output_tensors), finalize,
                            srcs + bufs, group=True)

    all_to_all = alltoall

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        """As gloo's, through the group's store: every other rank announces its
        arrival and waits for rank 0's release; rank 0 waits for each arrival in
        rank order until timeout (a timedelta or seconds; None: 30 minutes) and
        raises RuntimeError naming the first rank that did not arrive ("Rank 1
        failed to pass monitoredBarrier in 2000 ms"), or every such rank with
        wait_all_ranks ("Ranks 1, 2 failed ..."); without it, a rank 0 whose time
        ran out before a rank's turn raises "Rank 0 timed out in monitoredBarrier
        after N ms" (timeout 0 does at once). A rank that got no release in
        time raises gloo's "Rank r successfully reached monitoredBarrier, but
        received errors while waiting for send/recv from rank 0". Collectives
        issued before it are not waited for (as gloo)."""
        store = self._eng.store
        if store is None or self._size == 1:
            self.barrier().wait()
            return
        secs = 1800.0 if timeout is None else (
            timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout))
        ms = int(secs * 1000)
        self._monitored += 1
        key = "coll_monitored_barrier/%d/%d/" % (self._eng.gen, self._monitored)
        deadline = time.monotonic() + max(0.0, secs)

        def arrived(k):  # store.add(k, 0) reads a counter without blocking (1.13 has no check())
            while store.add(k, 0) == 0:
                if time.monotonic() >= deadline:
                    return store.add(k, 0) > 0
                time.sleep(0.0005)
            return True

        if self._rank != 0:
            store.add(key + str(self._rank), 1)
            if not arrived(key + "release"):
                raise RuntimeError("Rank %d successfully reached monitoredBarrier, but received errors while waiting "
                                   "for send/recv from rank 0. Please check rank 0 logs for faulty rank." % self._rank)
            return
        missing = []
        for r in range(1, self._size):
            if not wait_all_ranks and time.monotonic() >= deadline:  # gloo checks the time left first
                raise RuntimeError("Rank 0 timed out in monitoredBarrier after %d ms. Successfully processed ranks: "
                                   "%s" % (ms, ", ".join(str(q) for q in range(r)) or "none"))
            if not arrived(key + str(r)):
                missing.append(r)
                if not wait_all_ranks:
                    break
        if missing and wait_all_ranks:
            raise RuntimeError("Ranks %s failed to pass monitoredBarrier in %d ms"
                               % (", ".join(str(r) for r in missing), ms))
        if missing:
            raise RuntimeError("Rank %d failed to pass monitoredBarrier in %d ms" % (missing[0], ms))
        store.add(key + "release", 1)


# ---------------------------------------------------------------------------
# creation


def _timeout_seconds(timeout):
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        s = timeout.total_seconds()
    else:
        s = float(timeout)
    return max(1, int(s + 0.999))


def create_process_group(store, rank, size, timeout=None):
    """The creator registered with torch (register_backend(..., extended_api=False))."""
    tmo = None if "COLL_TIMEOUT" in os.environ else _timeout_seconds(timeout)
    gen = 0
    if size == 1:
        uid = _lib.get_unique_id()
    else:
        gen, uid = _exchange_unique_id(store, rank, size, tmo)
    comm = _lib.comm_init_rank(uid, size, rank, tmo)
    watch = None
    try:
        _clear_stale_init_barrier(store, rank, size, comm)
        watch = _rendezvous_watch(store, rank)
        eng = _Engine(comm, rank, size, store, gen)
        eng.timeout_sec = tmo
        eng.rendezvous_watch = watch
    except Exception:
        if watch is not None:
            watch.close()
        _lib.lib.collCommDestroy(comm)
        raise
    return ProcessGroupColl(eng, rank, size)


# -- init and destroy again (BR-17): what torch's own rendezvous leaves behind


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
