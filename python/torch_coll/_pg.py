"""ProcessGroupColl: a torch.distributed.ProcessGroup that drives libcoll.so.

One instance per torch process group (init_process_group and every
new_group):
* the communicator comes from the c10d Store torch hands the creator: rank 0
  calls collGetUniqueId and publishes the 128 bytes through the store
  (_rendezvous.py); every rank then calls collCommInitRank;
* collectives run on the group's coll stream and complete their Work from the
  group's engine thread (_work.py);
* sends and receives run on one two-rank communicator per direction (_p2p.py);
* dtypes and reduce ops map to coll's as _dtypes.py says.
"""
import datetime
import os
import sys
import threading
import time
import weakref

import torch
import torch.distributed as dist

from . import _cuda, _lib
from ._dtypes import _check_tensor, _nbytes, _op_name, _Outs, _plain, _plain_copy, _premul, _ptr, _reduction
from ._p2p import alltoall_calls, byte_view, split_offsets
from ._rendezvous import _clear_stale_init_barrier, _exchange_unique_id, _rendezvous_watch, _store_get_when_counted
from ._work import CollWork, _Engine

_c10d = torch._C._distributed_c10d
_ProcessGroup = _c10d.ProcessGroup
BACKEND_NAME = "coll"


def _any_source_enabled():  # read when a group is created
    return os.environ.get("COLL_TORCH_ANY_SOURCE", "0") not in ("", "0")


def _opt(opts, name, default):
    return getattr(opts, name, default) if opts is not None else default


def _unwrapped_code(fn):
    while hasattr(fn, "__wrapped__"):  # torch 2.x decorates its collectives
        fn = fn.__wrapped__
    return getattr(fn, "__code__", None)


_c10d_all_reduce_code = _unwrapped_code(dist.distributed_c10d.all_reduce)
_c10d_broadcast_code = _unwrapped_code(dist.distributed_c10d.broadcast)
_c10d_barrier_code = _unwrapped_code(dist.distributed_c10d.barrier)


def _blocking_call(opts, code):
    """True when the caller waits for the operation right after issuing it:
    torch 2.x says so in opts.asyncOp; torch 1.13 has no such field, and
    there the caller is torch.distributed's own function (frame `code`) with
    async_op=False.  Anything else (DDP's reducer, async_op=True, a direct
    call) counts as asynchronous."""
    a = getattr(opts, "asyncOp", None) if opts is not None else None
    if a is not None:
        return not a
    try:
        f = sys._getframe(3)  # here <- _submit_or_run <- the collective method <- its caller
    except ValueError:
        return False
    return f.f_code is code and f.f_locals.get("async_op") is False


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
        self._cuda_batch = None  # the CUDA sends/receives of a batch (_cuda.Batch)
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
    # collectives find no default device). coll runs on CPU tensors, and on
    # CUDA tensors where torch has CUDA (_cuda.py).
    @property
    def _device_types(self):
        devs = [torch.device("cpu")]
        if _cuda.cuda.is_available():
            devs.append(torch.device("cuda"))
        return devs

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
    # for every device.  CPU tensors need no coalescing: their sends and receives never block
    # each other (_p2p.py).  CUDA tensors' run in stream order on the group's communicator, so a
    # batch's are issued together at its end in one coll group (as NCCL's): for a CUDA device the
    # group says it coalesces, and torch 2.x brackets the batch with _start/_end_coalescing.
    supports_coalescing = False

    def _get_backend(self, device=None):
        if _cuda.is_cuda_device(device):
            return _CudaBackend(self)
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

    def _submit_or_run(self, opts, code, issue, result, finalize=None, keep=None):
        """A blocking call (see _blocking_call; `code` is the torch.distributed
        function whose frame calls us on torch 1.13) runs at once on the NULL
        stream (_Engine.run_blocking) when nothing is in flight; anything
        else goes to the stream.  issue(s) makes the coll call on stream s."""
        if _blocking_call(opts, code):
            work = self._eng.run_blocking(issue, result, finalize, CollWork)
            if work is not None:
                return work
        return self._submit(issue, result, finalize, keep)

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

        def issue(s=stream):  # s=None: the blocking fast path (_Engine.run_blocking)
            _lib.check(_lib.lib.collAllReduce(_ptr(buf), _ptr(buf), count, ctype, cop, comm, s), what)
        return issue

    def allreduce(self, tensors, opts=None):
        t = self._one(tensors, "allreduce")
        op = _opt(opts, "reduceOp", dist.ReduceOp.SUM)
        if isinstance(t, torch.Tensor) and t.layout == torch.sparse_coo:
            return self._sparse_allreduce(t, op)
        if _cuda.device_of([t], "allreduce") is not None:
            return _cuda.allreduce(self, [t], op)
        outs, keep = _Outs(self), []
        issue = self._issue_allreduce(t, op, "allreduce", outs, keep, None)
        return self._submit_or_run(opts, _c10d_all_reduce_code, issue, list(tensors), outs.finish, keep)

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
        if _cuda.device_of(list(tensors), "allreduce_coalesced") is not None:
            return _cuda.allreduce(self, list(tensors), op, "allreduce_coalesced")
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
        if _cuda.device_of([t], "broadcast") is not None:
            return _cuda.broadcast(self, t, root)
        outs = _Outs(self)
        buf = outs.buf(t, "broadcast", init=(root == self._rank))
        comm, stream, n = self._comm(), self._eng.stream, _nbytes(buf)

        def issue(s=stream):
            _lib.check(_lib.lib.collBroadcast(_ptr(buf), _ptr(buf), n, _lib.UINT8, root, comm, s), "broadcast")
        return self._submit_or_run(opts, _c10d_broadcast_code, issue, list(tensors), outs.finish, [buf])

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
        if _cuda.device_of([output, input], "all_gather_into_tensor") is not None:
            return _cuda.allgather_into(self, output, input)
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
        if _cuda.device_of(list(outl) + [inp], "allgather") is not None:
            return _cuda.allgather_list(self, outl, inp)
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
        if _cuda.device_of([output, input], "reduce_scatter_tensor") is not None:
            return _cuda.reduce_scatter_into(self, output, input, op)
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
        if _cuda.device_of([out] + list(lst), "reduce_scatter") is not None:
            return _cuda.reduce_scatter_list(self, out, lst, _opt(opts, "reduceOp", dist.ReduceOp.SUM))
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
        if _cuda.device_of([t], "reduce") is not None:
            return _cuda.reduce(self, t, root, op)
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

    # -- barrier: queued behind everything issued before it on this group; on a CUDA device (opts.device,
    # torch 2.x) a collBarrier on its current stream (_cuda.barrier)
    def barrier(self, opts=None):
        dev = _opt(opts, "device", None)
        if _cuda.is_cuda_device(dev):
            return _cuda.barrier(self, dev)
        comm, stream = self._comm(), self._eng.stream

        def issue(s=stream):
            _lib.check(_lib.lib.collBarrier(comm, s), "barrier")
        return self._submit_or_run(opts, _c10d_barrier_code, issue, [])

    # -- point to point: one channel (two-rank communicator + thread) per direction, see _Channel.
    # Messages of one direction are matched in order; tags are not used.
    def send(self, tensors, dstRank, tag=0):
        t = self._one(tensors, "send")
        self._check_rank(dstRank, "send destination")
        if dstRank == self._rank:
            raise RuntimeError("coll: send to self is not supported")
        if _cuda.device_of([t], "send") is not None:
            return _cuda.p2p(self, t, dstRank, True, "send")
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
        if _cuda.device_of([t], "recv") is not None:
            return _cuda.p2p(self, t, srcRank, False, "recv")
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
        buf = outs.buf(t, "recv from any source")  # no CUDA path: CUDA messages do not announce themselves
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
        self._cuda_batch = _cuda.Batch()

    start_coalescing = _start_coalescing

    def _end_coalescing(self, *args, **kwargs):
        futs, self._batch = self._batch or [], None
        cb, self._cuda_batch = self._cuda_batch, None
        if cb is not None and cb.calls:
            if futs:
                raise RuntimeError("coll: batch_isend_irecv: mixes CUDA and CPU tensors (one device per batch)")
            return _cuda.end_batch(self, cb)
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
        comm, stream, me, ws = self._comm(), self._eng.stream, self._rank, self._size

        def issue():
            alltoall_calls(sends, recvs, me, ws, comm, stream, what)
        return issue

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        what = "all_to_all_single"
        if _cuda.device_of([output, input], what) is not None:
            return _cuda.alltoall_single(self, output, input, output_split_sizes, input_split_sizes)
        src = self._src(input, what)
        _check_tensor(output, what)
        if src.dtype != output.dtype:
            raise RuntimeError("coll: %s: input dtype %s differs from output dtype %s" % (what, src.dtype, output.dtype))
        outs = _Outs(self)
        buf = outs.buf(output, what)
        ws, me = self._size, self._rank
        so = split_offsets(src, list(input_split_sizes), ws, "input", what)
        ro = split_offsets(buf, list(output_split_sizes), ws, "output", what)
        sb, rb = byte_view(src), byte_view(buf)
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
        if _cuda.device_of(list(output_tensors) + list(input_tensors), what) is not None:
            return _cuda.alltoall_list(self, output_tensors, input_tensors)
        if len(output_tensors) != ws or len(input_tensors) != ws:
            raise RuntimeError("coll: %s: needs %d input and output tensors" % (what, ws))
        outs = _Outs(self)
        srcs = [self._src(t, what) for t in input_tensors]
        bufs = [outs.buf(t, what) for t in output_tensors]
        for s, b in zip(srcs, bufs):
            if s.dtype != b.dtype:
                raise RuntimeError("coll: %s: input and output dtypes differ" % what)
        sends = [byte_view(s) for s in srcs]
        recvs = [byte_view(b) for b in bufs]
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


class _CudaBackend:
    """The group as its CUDA backend (ProcessGroup._get_backend(cuda device)):
    the group itself, except that it coalesces (see supports_coalescing)."""
    supports_coalescing = True

    def __init__(self, pg):
        self._pg = pg

    def __getattr__(self, name):
        return getattr(self._pg, name)


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


# The engine of the current default group.  torch 2.x's destroy_process_group()
# shuts every group down; torch 1.13's only drops its references, so a group
# from new_group that the user still holds would keep its communicator and
# threads.  So closing a default group closes the groups made under it.
_world_engine = None


def create_process_group(store, rank, size, timeout=None):
    """The creator registered with torch (register_backend(..., extended_api=False))."""
    global _world_engine
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
        world = _world_engine() if _world_engine is not None else None
        if not dist.is_initialized():  # the default group: torch sets it when we return
            _world_engine = weakref.ref(eng)
        elif world is not None and not world.closed:
            world.subgroups.add(eng)
    except Exception:
        if watch is not None:
            watch.close()
        _lib.lib.collCommDestroy(comm)
        raise
    return ProcessGroupColl(eng, rank, size)
