"""CUDA tensors (torch 2.x with CUDA; issue 16): collectives on torch's current
CUDA stream, as ProcessGroupNCCL runs them.

* Every operation runs on the current stream of its tensors' device
  (torch.cuda.current_stream(dev)); its coll stream wraps that CUDA stream
  (collStreamCreateCuda) and is made once per (device, CUDA stream) and
  cached on the group's engine until the group is closed.  The coll call
  returns at once; work enqueued later on that stream sees the result.
* Staging (a non-contiguous tensor, the packed inputs and outputs of the
  list forms) is plain tensor work enqueued on the same stream before and
  after the call, so stream order replaces the host path's waits.
* The Work (CudaWork) completes through a CUDA event recorded on the stream
  after the call: wait() makes the *current* stream wait for that event (the
  host does not wait), is_completed() queries the event, and get_future() is
  a CUDA-aware torch Future already marked complete on that stream (its
  callbacks and wait() are ordered after the operation, as NCCL's are).
  Errors the operation meets later are raised by wait() from
  collStreamQuery and by the group's next call.

Supported on CUDA tensors: allreduce (and coalesced), broadcast, allgather
(list and into-tensor), reduce_scatter (list and tensor), reduce, send and
recv, all_to_all_single, all_to_all, barrier.  The other operations refuse
CUDA tensors with a message naming the operation.

* Sends and receives run on the group's communicator (not on _p2p.py's
  per-direction channels, which are host threads making blocking calls), in
  stream order with its collectives as NCCL's do: a send waits for its
  receive.  Inside a batch (_start/_end_coalescing: batch_isend_irecv; the
  group's CUDA backend says it coalesces so torch 2.x brackets the batch)
  they are kept (PendingWork) and issued together at the batch's end in one
  coll group, so a batch's sends and receives never wait for each other.
* all_to_all(_single) is one coll group of sends and receives on the stream;
  the rank's own block is a copy on the stream.
* barrier (a CUDA device in its options) is collBarrier on the current
  stream; its wait() also blocks the host, as ProcessGroupNCCL's does.

The seams below (`is_cuda`, `is_cuda_device`, `cuda`, `stream_create_cuda`, `make_future`) are
the only places that touch torch.cuda or the CUDA build of libcoll, so the
logic is tested on CPU-only torch with fakes (tests/torch/test_cuda_seam.py).
"""
import ctypes

import torch

from . import _lib
from ._dtypes import _nbytes, _premul, _reduction
from ._p2p import alltoall_calls, byte_view, split_offsets

SUPPORTED = ("allreduce", "allreduce_coalesced", "broadcast", "allgather", "all_gather_into_tensor",
             "reduce_scatter", "reduce_scatter_tensor", "reduce", "send", "recv", "all_to_all_single",
             "all_to_all", "barrier")


# -- seams (replaced by the tests' fakes) ------------------------------------

def is_cuda(t):
    return isinstance(t, torch.Tensor) and t.device.type == "cuda"


def is_cuda_device(device):
    """device (a torch.device, its string, or anything else: False) is a CUDA device."""
    if isinstance(device, str):
        return device.split(":")[0] == "cuda"
    return getattr(device, "type", None) == "cuda"


cuda = torch.cuda  # current_stream(dev), Event(), device(dev)


def stream_create_cuda(comm, cuda_stream):
    """A coll stream wrapping the CUDA stream handle `cuda_stream` (int)."""
    f = getattr(_lib.lib, "collStreamCreateCuda", None)
    if f is None:
        raise _lib.CollError(_lib.INVALID_USAGE, "coll: this libcoll cannot run collectives on CUDA tensors "
                             "(no collStreamCreateCuda: a build before issue 16): %s" % _lib.path)
    f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    f.restype = ctypes.c_int
    s = ctypes.c_void_p()
    _lib.check(f(comm, cuda_stream, ctypes.byref(s)), "collStreamCreateCuda")
    return s.value


def make_future(device):
    """A Future whose completion is recorded on the current CUDA streams."""
    try:
        return torch.futures.Future(devices=[device])
    except TypeError:  # a torch without CUDA-aware futures
        return torch.futures.Future()


# -- dispatch -------------------------------------------------------------------

def device_of(tensors, what):
    """The CUDA device of tensors, or None when they all are CPU tensors;
    mixing devices is an error naming the operation."""
    flat = [t for t in tensors if isinstance(t, torch.Tensor)]
    cu = [t for t in flat if is_cuda(t)]
    if not cu:
        return None
    if len(cu) != len(flat):
        raise RuntimeError("coll: %s: mixes CUDA and CPU tensors (all tensors of one call must be on one device)"
                           % what)
    dev = cu[0].device
    for t in cu[1:]:
        if t.device != dev:
            raise RuntimeError("coll: %s: tensors on %s and %s (all tensors of one call must be on one device)"
                               % (what, dev, t.device))
    return dev


def refuse(tensors, what):
    """For the operations without a CUDA path (_dtypes._check_tensor)."""
    if any(is_cuda(t) for t in tensors):
        raise RuntimeError("coll: %s: CUDA tensors are not supported for this operation yet (supported: %s); "
                           "use CPU tensors" % (what, ", ".join(SUPPORTED)))


def coll_stream(eng, device):
    """(coll stream, CUDA stream object) for device's current CUDA stream,
    the coll stream made once per CUDA stream (cached on the engine)."""
    cs = cuda.current_stream(device)
    key = (getattr(device, "index", None), int(cs.cuda_stream))
    cache = eng.cuda_streams
    with eng.issue_lock:
        eng._check_open()
        if key not in cache:
            cache[key] = stream_create_cuda(eng.comm, int(cs.cuda_stream))
        return cache[key], cs


def close_streams(eng):
    for s in eng.cuda_streams.values():
        if s is not None:
            _lib.lib.collStreamSynchronize(s)
            _lib.lib.collStreamDestroy(s)
    eng.cuda_streams.clear()


def _contig(t):
    return t if t.is_contiguous() else t.contiguous()


def _ptr(t):
    return t.data_ptr() if t.numel() else None


class CudaWork(torch._C._distributed_c10d.Work):
    """Completes through a CUDA event recorded after the operation."""

    def __init__(self, event, fut, stream, device, result, keep, host_sync=False):
        torch._C._distributed_c10d.Work.__init__(self)
        self._host_sync = host_sync  # barrier: wait() blocks the host too, as NCCL's
        self._event = event
        self._fut = fut
        self._stream = stream  # the coll stream, for errors
        self._device = device
        self._result = result
        self._keep = keep  # staging tensors live as long as the Work

    def _raise_error(self):
        if self._stream is None:
            return
        r = _lib.lib.collStreamQuery(self._stream)
        if r not in (_lib.SUCCESS, _lib.IN_PROGRESS):
            raise _lib.CollError(r, _lib.message(r, "CUDA collective"))

    def wait(self, timeout=None):
        """The current stream waits for the operation; the host does not."""
        cuda.current_stream(self._device).wait_event(self._event)
        if self._host_sync:
            self._event.synchronize()
        self._raise_error()
        return True

    synchronize = wait

    def is_completed(self):
        return bool(self._event.query())

    def is_success(self):
        try:
            self._raise_error()
            return True
        except Exception:
            return False

    def exception(self):
        try:
            self._raise_error()
            return None
        except Exception as e:
            return e

    def get_future(self):
        return self._fut

    def result(self):
        self.wait()
        return list(self._result)

    def source_rank(self):
        raise RuntimeError("coll: source_rank() is only defined for a receive from any source")

    def abort(self):
        raise RuntimeError("coll: aborting a single operation is not supported")


def grouped(calls):
    """Runs calls() between collGroupStart and collGroupEnd (its sends and
    receives run concurrently); the group is closed even when calls raise."""
    _lib.lib.collGroupStart()
    try:
        calls()
    finally:
        r = _lib.lib.collGroupEnd()
    _lib.check(r, "collGroupEnd")


def run(pg, device, what, result, body, host_sync=False):
    """Runs body(stream, comm, keep) (enqueues staging and coll calls) on
    device's current stream and returns its CudaWork."""
    eng = pg._eng
    s, cs = coll_stream(eng, device)
    keep = []
    with cuda.device(device):
        body(s, eng.comm, keep)
        ev = cuda.Event()
        ev.record(cs)
        fut = make_future(device)
        fut.set_result(result)
    return CudaWork(ev, fut, s, device, result, keep, host_sync)


# -- the operations ---------------------------------------------------------------

def allreduce(pg, tensors, reduce_op, what="allreduce"):
    dev = device_of(tensors, what)

    def body(s, comm, keep):
        for t in tensors:
            ctype, cop, count, factor = _reduction(t, reduce_op, what)
            buf = _contig(t)
            if factor is not None:
                _premul(buf, factor)
            _lib.check(_lib.lib.collAllReduce(_ptr(buf), _ptr(buf), count, ctype, cop, comm, s), what)
            if buf is not t:
                t.copy_(buf)
            keep.append(buf)
    return run(pg, dev, what, list(tensors), body)


def broadcast(pg, t, root, what="broadcast"):
    dev = device_of([t], what)

    def body(s, comm, keep):
        buf = _contig(t)
        _lib.check(_lib.lib.collBroadcast(_ptr(buf), _ptr(buf), _nbytes(buf), _lib.UINT8, root, comm, s), what)
        if buf is not t:
            t.copy_(buf)
        keep.append(buf)
    return run(pg, dev, what, [t], body)


def reduce(pg, t, root, reduce_op, what="reduce"):
    dev = device_of([t], what)

    def body(s, comm, keep):
        ctype, cop, count, factor = _reduction(t, reduce_op, what)
        buf = _contig(t)
        if factor is not None:  # a non-root's input stays as it was
            buf = _premul(buf if pg._rank == root else buf.clone(), factor)
        _lib.check(_lib.lib.collReduce(_ptr(buf), _ptr(buf), count, ctype, cop, root, comm, s), what)
        if pg._rank != root:
            buf = t
        if buf is not t:
            t.copy_(buf)
        keep.append(buf)
    return run(pg, dev, what, [t], body)


def _check_gather(pg, out_bytes, in_bytes, out_dtype, in_dtype, what):
    if out_bytes != pg._size * in_bytes:
        raise RuntimeError("coll: %s: output has %d bytes, expected world size %d x %d input bytes"
                           % (what, out_bytes, pg._size, in_bytes))
    if out_dtype != in_dtype:
        raise RuntimeError("coll: %s: output dtype %s differs from input dtype %s" % (what, out_dtype, in_dtype))


def allgather_into(pg, out, inp, what="all_gather_into_tensor"):
    dev = device_of([out, inp], what)
    _check_gather(pg, _nbytes(out), _nbytes(inp), out.dtype, inp.dtype, what)

    def body(s, comm, keep):
        src, buf = _contig(inp), _contig(out)
        _lib.check(_lib.lib.collAllGather(_ptr(src), _ptr(buf), _nbytes(src), _lib.UINT8, comm, s), what)
        if buf is not out:
            out.copy_(buf)
        keep += [src, buf]
    return run(pg, dev, what, [out], body)


def allgather_list(pg, outs, inp, what="allgather"):
    dev = device_of(list(outs) + [inp], what)
    if len(outs) != pg._size:
        raise RuntimeError("coll: %s: %d outputs for world size %d" % (what, len(outs), pg._size))
    for o in outs:
        if _nbytes(o) != _nbytes(inp) or o.dtype != inp.dtype:
            raise RuntimeError("coll: %s: output tensor %s/%s does not match input %s/%s"
                               % (what, tuple(o.shape), o.dtype, tuple(inp.shape), inp.dtype))

    def body(s, comm, keep):
        src = _contig(inp)
        gathered = torch.empty((pg._size,) + tuple(src.shape), dtype=src.dtype, device=src.device)
        _lib.check(_lib.lib.collAllGather(_ptr(src), _ptr(gathered), _nbytes(src), _lib.UINT8, comm, s), what)
        for r, o in enumerate(outs):
            o.copy_(gathered[r].view(o.shape))
        keep += [src, gathered]
    return run(pg, dev, what, list(outs), body)


def reduce_scatter_into(pg, out, inp, reduce_op, what="reduce_scatter_tensor"):
    dev = device_of([out, inp], what)
    if inp.numel() != pg._size * out.numel() or inp.dtype != out.dtype:
        raise RuntimeError("coll: %s: input %s/%s must hold world size %d x output %s/%s"
                           % (what, tuple(inp.shape), inp.dtype, pg._size, tuple(out.shape), out.dtype))

    def body(s, comm, keep):
        ctype, cop, count, factor = _reduction(out, reduce_op, what)
        src, buf = _contig(inp), _contig(out)
        if factor is not None:
            src = _premul(src.clone(), factor)
        _lib.check(_lib.lib.collReduceScatter(_ptr(src), _ptr(buf), count, ctype, cop, comm, s), what)
        if buf is not out:
            out.copy_(buf)
        keep += [src, buf]
    return run(pg, dev, what, [out], body)


def reduce_scatter_list(pg, out, inputs, reduce_op, what="reduce_scatter"):
    dev = device_of([out] + list(inputs), what)
    if len(inputs) != pg._size:
        raise RuntimeError("coll: %s: %d inputs for world size %d" % (what, len(inputs), pg._size))
    for t in inputs:
        if t.numel() != out.numel() or t.dtype != out.dtype:
            raise RuntimeError("coll: %s: input %s/%s does not match output %s/%s"
                               % (what, tuple(t.shape), t.dtype, tuple(out.shape), out.dtype))

    def body(s, comm, keep):
        ctype, cop, count, factor = _reduction(out, reduce_op, what)
        packed = torch.cat([t.reshape(-1) for t in inputs])
        if factor is not None:
            _premul(packed, factor)
        buf = _contig(out)
        _lib.check(_lib.lib.collReduceScatter(_ptr(packed), _ptr(buf), count, ctype, cop, comm, s), what)
        if buf is not out:
            out.copy_(buf)
        keep += [packed, buf]
    return run(pg, dev, what, [out], body)


def barrier(pg, device, what="barrier"):
    """collBarrier on device's current stream; wait() blocks the host until
    it passed (ProcessGroupNCCL's barrier does the same)."""
    def body(s, comm, keep):
        _lib.check(_lib.lib.collBarrier(comm, s), what)
    return run(pg, device, what, [], body, host_sync=True)


# -- sends and receives: on the group's communicator, in stream order --------

def p2p_calls(t, peer, sending, what):
    """calls(stream, comm, keep, after) of one send (t to peer) or receive
    (into t from peer); the copy back of a staged receive is put on `after`,
    to be enqueued once the call was launched (after collGroupEnd in a batch)."""
    def calls(s, comm, keep, after):
        buf = _contig(t)
        if sending:
            _lib.check(_lib.lib.collSend(_ptr(buf), _nbytes(buf), _lib.UINT8, peer, comm, s), what)
        else:
            _lib.check(_lib.lib.collRecv(_ptr(buf), _nbytes(buf), _lib.UINT8, peer, comm, s), what)
            if buf is not t:
                after.append(lambda: t.copy_(buf))
        keep.append(buf)
    return calls


def _then(issue, after):
    issue()
    for f in after:
        f()


class PendingWork(torch._C._distributed_c10d.Work):
    """A send or receive of a batch (batch_isend_irecv): issued when the batch
    ends, then the batch's CudaWork stands for it."""

    def __init__(self, result):
        torch._C._distributed_c10d.Work.__init__(self)
        self._result = result
        self.batch = None

    def _work(self):
        if self.batch is None:
            raise RuntimeError("coll: this send/receive of a batch is issued when the batch ends "
                               "(batch_isend_irecv returns the batch's Work)")
        return self.batch

    def wait(self, timeout=None):
        return self._work().wait(timeout)

    synchronize = wait

    def is_completed(self):
        return self.batch is not None and self.batch.is_completed()

    def is_success(self):
        return self._work().is_success()

    def exception(self):
        return self._work().exception()

    def get_future(self):
        return self._work().get_future()

    def result(self):
        self.wait()
        return list(self._result)


def p2p(pg, t, peer, sending, what):
    """A send or receive of CUDA tensor t on the group's communicator and
    device's current stream, or, inside a batch (pg._cuda_batch), deferred to
    the batch's end."""
    dev = device_of([t], what)
    calls = p2p_calls(t, peer, sending, what)
    batch = pg._cuda_batch
    if batch is not None:
        if batch.device is not None and batch.device != dev:
            raise RuntimeError("coll: %s: a batch on %s and %s (one device per batch)" % (what, batch.device, dev))
        batch.device = dev
        batch.calls.append(calls)
        work = PendingWork([t])
        batch.works.append(work)
        return work

    def body(s, comm, keep):
        after = []
        _then(lambda: calls(s, comm, keep, after), after)
    return run(pg, dev, what, [t], body)


class Batch:
    """The CUDA sends and receives between _start_coalescing and
    _end_coalescing, issued together in one coll group."""

    def __init__(self):
        self.device = None
        self.calls = []
        self.works = []


def end_batch(pg, batch):
    """Issues a batch's sends and receives in one coll group on the current
    stream; returns its CudaWork (None for an empty batch)."""
    if not batch.calls:
        return None

    def body(s, comm, keep):
        after = []
        _then(lambda: grouped(lambda: [c(s, comm, keep, after) for c in batch.calls]), after)
    work = run(pg, batch.device, "batch_isend_irecv", [], body)
    for w in batch.works:
        w.batch = work
    return work


# -- all-to-all: one coll group of sends and receives, the local block copied --

def _check_self(pg, send_bytes, recv_bytes, what):
    if send_bytes != recv_bytes:
        raise RuntimeError("coll: %s: this rank sends %d bytes to itself but expects %d"
                           % (what, send_bytes, recv_bytes))


def _alltoall(pg, sends, recvs, what):
    me = pg._rank

    def calls(s, comm):
        grouped(lambda: alltoall_calls(sends, recvs, me, pg._size, comm, s, what))
        recvs[me].copy_(sends[me])
    return calls


def alltoall_single(pg, out, inp, out_splits, in_splits, what="all_to_all_single"):
    dev = device_of([out, inp], what)
    if inp.dtype != out.dtype:
        raise RuntimeError("coll: %s: input dtype %s differs from output dtype %s" % (what, inp.dtype, out.dtype))
    ws = pg._size
    so = split_offsets(inp, list(in_splits), ws, "input", what)
    ro = split_offsets(out, list(out_splits), ws, "output", what)
    _check_self(pg, so[pg._rank][1], ro[pg._rank][1], what)

    def body(s, comm, keep):
        src, buf = _contig(inp), _contig(out)
        sb, rb = byte_view(src), byte_view(buf)
        _alltoall(pg, [sb[o:o + n] for o, n in so], [rb[o:o + n] for o, n in ro], what)(s, comm)
        if buf is not out:
            out.copy_(buf)
        keep += [src, buf]
    return run(pg, dev, what, [out], body)


def alltoall_list(pg, outs, inps, what="all_to_all"):
    dev = device_of(list(outs) + list(inps), what)
    ws = pg._size
    if len(outs) != ws or len(inps) != ws:
        raise RuntimeError("coll: %s: needs %d input and output tensors" % (what, ws))
    for i, o in zip(inps, outs):
        if i.dtype != o.dtype:
            raise RuntimeError("coll: %s: input and output dtypes differ" % what)
    _check_self(pg, _nbytes(inps[pg._rank]), _nbytes(outs[pg._rank]), what)

    def body(s, comm, keep):
        srcs, bufs = [_contig(t) for t in inps], [_contig(t) for t in outs]
        _alltoall(pg, [byte_view(t) for t in srcs], [byte_view(t) for t in bufs], what)(s, comm)
        for o, b in zip(outs, bufs):
            if b is not o:
                o.copy_(b)
        keep += srcs + bufs
    return run(pg, dev, what, list(outs), body)
