"""Work objects and the engine of the coll backend.

Every operation is issued on one coll stream of its group (the call returns
at once; coll's progress thread runs the work in issue order).  A Python
worker thread per group (_Engine) waits with collStreamSynchronize and then,
in issue order, runs each operation's finishing step (copies back into
non-contiguous outputs and the like) and completes its torch.futures.Future.
The Work returned (CollWork) wraps that future: async_op=True really
overlaps, and Work.wait() raises the RuntimeError (collGetLastError's text) of
a failed operation, e.g. when a peer died.  (A _create_work_from_future Work
would not: on torch 1.13 its wait() ignores the future's error.)

Blocking calls are the exception (_Engine.run_blocking): an all_reduce,
broadcast or barrier whose caller waits at once (_pg._blocking_call) runs on
coll's NULL stream in the calling thread while nothing of the group is in
flight, and returns a completed Work: no wake-up of the progress and
completion threads, which costs a scheduling delay each on a busy machine.

Completed Work objects are kept alive a little longer: on torch < 2.14 a
Python Work whose Python object died can no longer be waited on from C++
(the trampoline falls back to c10d::Work::wait, which never returns), and C++
callers (DDP's reducer, _broadcast_coalesced) may call wait()/get_future()
after we completed the future.  They do so promptly, so a short retention
suffices.
"""
import atexit
import collections
import threading
import time
import weakref

import torch

from . import _cuda, _lib
from ._lib import CollError
from ._p2p import _Channel
from ._rendezvous import _RENDEZVOUS_WAIT_SECONDS, _wait_rendezvous_closed

_c10d = torch._C._distributed_c10d

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
        self.cuda_streams = {}  # (device, CUDA stream) -> coll stream wrapping it (_cuda.py)
        self.pending = collections.deque()
        self.stop = False
        self.error = None  # message of the first failure: later calls fail at once
        self.closed = False
        self.inflight = 0  # submitted, not yet completed
        self.retained = collections.deque()  # (time completed, [works])
        self.timeout_sec = None
        self.rendezvous_watch = None  # see _rendezvous_watch
        self.subgroups = weakref.WeakSet()  # of a default group: the engines of the groups made under it
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

    def run_blocking(self, issue, result, finalize, work_type):
        """The fast path of a blocking call (the caller waits at once): with
        nothing of this group in flight, issue(None) runs the operation on
        coll's NULL stream in this thread, and the Work returned is complete.
        That costs no wake-up of the progress and completion threads (each
        a scheduling delay of 20 us to milliseconds on a busy machine, where
        a 1 KiB all-reduce takes about 1-10 us).  Returns None when
        operations are in flight (they complete first, in order, on the
        usual path).  A failure raises the RuntimeError at once; one other
        than a refused argument fails the group's later calls too, as on
        the stream."""
        with self.issue_lock:
            self._check_open()
            with self.cond:
                if self.inflight:
                    return None
            try:
                issue(None)
            except CollError as e:
                if e.code not in (_lib.INVALID_ARGUMENT, _lib.INVALID_USAGE):
                    self.error = str(e)
                raise
            if finalize is not None:
                finalize()
        fut = torch.futures.Future()
        fut.set_result(result)
        work = work_type(fut)
        self.retain([work])
        return work

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
        for sub in list(self.subgroups):  # see create_process_group
            sub.close(timeout, wait_rendezvous)
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
        _cuda.close_streams(self)
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


atexit.register(_close_all)
