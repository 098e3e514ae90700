"""The shim's CUDA path (python/torch_coll/_cuda.py) on CPU-only torch, through
its seams: tensors marked as "CUDA" go the CUDA way; torch.cuda is a fake
(streams with a cuda_stream handle that record the events they were made to
wait for, events that record the stream they were recorded on);
collStreamCreateCuda is a fake that counts its calls and returns the NULL
coll stream, so each call is blocking on the host and later tensor work sees
its result as stream order would give it.  Checks, on 2 processes:
* every supported collective gives the values the CPU path gives, also for a
  non-contiguous tensor (staged and copied back) and the list forms;
* one coll stream per CUDA stream: made at the first call on a stream,
  reused by later calls on it, a new one for another stream;
* Work: an event is recorded on the op's stream after the call; wait() makes
  the current stream wait for it and never synchronizes the host;
  is_completed() is the event's query; get_future() holds the tensors;
* send/recv (also staged, non-contiguous), batch_isend_irecv (both ranks
  sending first: one coll group, staged receives copied back after it),
  all_to_all_single (uneven splits) and all_to_all, barrier (its wait()
  synchronizes the host once): exact values, each on a new CUDA stream that
  gets its coll stream and the Work's event;
* CPU and "CUDA" tensors mixed in one call, and CUDA tensors to an operation
  without a CUDA path (gather), are refused with a message naming the operation;
* the group lists the cuda device where torch has CUDA;
* without collStreamCreateCuda (or without a GPU) the real seam raises
  CollError with coll's message.
Run: /usr/bin/python3 tests/torch/test_cuda_seam.py"""
import contextlib
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402


def install_fakes():
    import torch
    from torch_coll import _cuda

    class Stream:
        def __init__(self, handle):
            self.cuda_stream = handle
            self.waited = []

        def wait_event(self, ev):
            self.waited.append(ev)

    class Event:
        syncs = 0

        def __init__(self):
            self.stream = None

        def record(self, stream):
            self.stream = stream

        def query(self):
            return self.stream is not None

        def synchronize(self):
            Event.syncs += 1

    class Cuda:
        def __init__(self):
            self.cur = Stream(0x1000)

        def current_stream(self, device=None):
            return self.cur

        def device(self, d):
            return contextlib.nullcontext()

        def is_available(self):
            return True

    Cuda.Event = Event
    fake = Cuda()
    created = []
    _cuda.cuda = fake
    _cuda.is_cuda = lambda t: isinstance(t, torch.Tensor) and getattr(t, "fake_cuda", False)
    _cuda.make_future = lambda device: torch.futures.Future()

    def create(comm, handle):
        created.append(handle)
        return None
    _cuda.stream_create_cuda = create
    return fake, created, Stream, Event


def mark(t):
    t.fake_cuda = True
    return t


def seam_worker(rank, ws, backend):
    import torch
    import torch.distributed as dist
    fake, created, Stream, Event = install_fakes()
    res = {}
    # all_reduce: values, the CudaWork, its event on the op's stream
    t = mark(torch.arange(8, dtype=torch.float32) + rank)
    w = dist.all_reduce(t, async_op=True)
    res["work_type"] = type(w).__name__
    res["allreduce"] = t.tolist()
    res["event_on_stream"] = w._event.stream is fake.cur
    res["completed"] = w.is_completed()
    w.wait()
    res["waited"] = fake.cur.waited == [w._event]
    res["future"] = [x.tolist() for x in w.get_future().wait()]
    res["host_syncs"] = Event.syncs
    # the stream cache: one per CUDA stream
    dist.all_reduce(mark(torch.ones(4)))
    res["created_after_2"] = list(created)
    a = fake.cur
    fake.cur = Stream(0x2000)
    b = mark(torch.full((5,), float(rank + 1)))
    dist.broadcast(b, src=1)
    res["broadcast"] = b.tolist()
    fake.cur = a
    r = mark(torch.arange(6, dtype=torch.int64) * (rank + 1))
    dist.reduce(r, dst=0)
    res["reduce"] = r.tolist()
    res["created"] = list(created)
    # non-contiguous: staged and copied back
    nc = mark(torch.arange(16, dtype=torch.float64).reshape(4, 4).t() * (rank + 1))
    dist.all_reduce(nc, op=dist.ReduceOp.MAX)
    res["noncontig"] = nc.tolist()
    # all-gather (list and into a tensor), reduce-scatter (tensor and list)
    inp = mark(torch.tensor([rank * 10 + 1, rank * 10 + 2], dtype=torch.int32))
    outs = [mark(torch.zeros(2, dtype=torch.int32)) for _ in range(ws)]
    dist.all_gather(outs, inp)
    res["allgather"] = [o.tolist() for o in outs]
    out = mark(torch.zeros(2 * ws, dtype=torch.int32))
    dist.distributed_c10d.all_gather_into_tensor(out, inp) if hasattr(dist, "all_gather_into_tensor") else \
        dist._all_gather_base(out, inp)
    res["allgather_into"] = out.tolist()
    rs_in = mark(torch.arange(3 * ws, dtype=torch.float32) + rank)
    rs_out = mark(torch.zeros(3))
    (dist.reduce_scatter_tensor if hasattr(dist, "reduce_scatter_tensor") else dist._reduce_scatter_base)(rs_out, rs_in)
    res["reduce_scatter_tensor"] = rs_out.tolist()
    lst = [mark(torch.full((2,), float(rank * 100 + i))) for i in range(ws)]
    rs2 = mark(torch.zeros(2))
    dist.reduce_scatter(rs2, lst)
    res["reduce_scatter_list"] = rs2.tolist()
    # refusals
    try:
        dist.all_gather([torch.zeros(2, dtype=torch.int32) for _ in range(ws)], inp)
        res["mixed"] = "no error"
    except RuntimeError as e:
        res["mixed"] = str(e)
    try:
        dist.gather(mark(torch.ones(2)), [mark(torch.zeros(2)) for _ in range(ws)] if rank == 0 else None, dst=0)
        res["refused"] = "no error"
    except RuntimeError as e:
        res["refused"] = str(e)
    res["device_types"] = [str(d) for d in dist.distributed_c10d._get_default_group()._device_types] \
        if hasattr(dist.distributed_c10d._get_default_group(), "_device_types") else None
    return res


def p2p_worker(rank, ws, backend):
    """send/recv, batch_isend_irecv, all_to_all(_single) and barrier on fake CUDA
    tensors, each on a CUDA stream of its own (handle 0x100 * step): the
    coll stream made for it, the Work's event recorded on it."""
    import types
    import torch
    import torch.distributed as dist
    from torch_coll import _cuda, _lib
    fake, created, Stream, Event = install_fakes()
    _cuda.is_cuda_device = lambda d: True  # the fake CUDA tensors are on the cpu device
    groups = []
    real_start = _lib.lib.collGroupStart

    def group_start():
        groups.append(1)
        return real_start()
    _lib.lib.collGroupStart = group_start
    peer, res, step = 1 - rank, {}, [0]

    def on_new_stream(name, op):
        step[0] += 1
        fake.cur = Stream(0x100 * step[0])
        g0 = len(groups)
        w = op()
        ws_ = w if isinstance(w, list) else [w]
        works = [x.batch if type(x).__name__ == "PendingWork" else x for x in ws_]
        res[name + "_stream"] = [created[-1] == fake.cur.cuda_stream] + \
            [x._event.stream is fake.cur for x in works]
        res[name + "_types"] = sorted(set(type(x).__name__ for x in ws_))
        for x in ws_:
            x.wait()
        res[name + "_groups"] = len(groups) - g0
        return w

    # send / recv (rank 0 -> 1, then 1 -> 0 with non-contiguous tensors on both sides)
    a = mark(torch.arange(5, dtype=torch.float32) * 1.5 if rank == 0 else torch.zeros(5))
    on_new_stream("p2p1", lambda: dist.isend(a, 1) if rank == 0 else dist.irecv(a, 0))
    res["p2p1"] = a.tolist()
    b = mark(torch.arange(12, dtype=torch.int64).reshape(3, 4).t() if rank == 1
             else torch.zeros(3, 4, dtype=torch.int64).t())
    on_new_stream("p2p2", lambda: dist.isend(b, 0) if rank == 1 else dist.irecv(b, 1))
    res["p2p2"] = b.tolist()
    # a batch: both ranks send first, in one coll group; a non-contiguous receive copied back after it
    out = mark(torch.zeros(3))
    out_nc = mark(torch.zeros(2, 2).t())
    ops = [dist.P2POp(dist.isend, mark(torch.full((3,), float(rank + 1))), peer),
           dist.P2POp(dist.isend, mark(torch.arange(4.0).reshape(2, 2).t() + 10 * rank), peer),
           dist.P2POp(dist.irecv, out, peer), dist.P2POp(dist.irecv, out_nc, peer)]
    on_new_stream("batch", lambda: dist.batch_isend_irecv(ops))
    res["batch"] = [out.tolist(), out_nc.tolist()]
    # all_to_all_single: uneven splits into a non-contiguous output
    inp = mark(torch.arange(6, dtype=torch.float32).reshape(3, 2) + 100 * rank)
    o = mark(torch.zeros(2, 3).t())
    sp = [1, 2] if rank == 0 else [2, 1]
    on_new_stream("a2a_single", lambda: dist.all_to_all_single(o, inp, sp, sp, async_op=True))
    res["a2a_single"] = o.tolist()
    # all_to_all, the list form
    ins = [mark(torch.full((2,), rank * 10 + j, dtype=torch.int32)) for j in range(ws)]
    outs = [mark(torch.zeros(2, dtype=torch.int32)) for _ in range(ws)]
    on_new_stream("a2a", lambda: dist.all_to_all(outs, ins, async_op=True))
    res["a2a"] = [x.tolist() for x in outs]
    # barrier: its wait() blocks the host (one event synchronize), as NCCL's
    pg = dist.distributed_c10d._get_default_group()
    s0 = Event.syncs
    on_new_stream("barrier", lambda: pg.barrier(types.SimpleNamespace(device=torch.device("cuda", 0))))
    res["barrier_syncs"] = Event.syncs - s0
    res["created"] = len(created)
    return res


class CudaSeamTest(unittest.TestCase):
    def test_new_ops_on_fake_cuda(self):
        """send/recv, batch_isend_irecv, all_to_all(_single), barrier: no longer refused."""
        res = harness.run(p2p_worker, 2, "coll", timeout=120)
        for rank, r in enumerate(res):
            for name in ("p2p1", "p2p2", "batch", "a2a_single", "a2a", "barrier"):
                self.assertEqual(r[name + "_stream"], [True] * len(r[name + "_stream"]), (name, r))
                self.assertTrue(set(r[name + "_types"]) <= {"CudaWork", "PendingWork"}, (name, r))
            self.assertEqual(r["p2p1"], [0.0, 1.5, 3.0, 4.5, 6.0])
            self.assertEqual(r["p2p2"], [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]])
            self.assertEqual(r["p2p1_groups"], 0)
            self.assertEqual(r["batch"], [[float(2 - rank)] * 3, [[10.0 * (1 - rank), 2.0 + 10 * (1 - rank)],
                                                                   [1.0 + 10 * (1 - rank), 3.0 + 10 * (1 - rank)]]])
            self.assertEqual(r["batch_groups"], 1)
            self.assertEqual(r["a2a_single"], [[0.0, 1.0], [100.0, 101.0], [102.0, 103.0]] if rank == 0
                             else [[2.0, 3.0], [4.0, 5.0], [104.0, 105.0]])
            self.assertEqual(r["a2a_single_groups"], 1)
            self.assertEqual(r["a2a"], [[rank, rank], [10 + rank, 10 + rank]])
            self.assertEqual(r["barrier_syncs"], 1)
            self.assertEqual(r["created"], 6)

    def test_ops_on_fake_cuda(self):
        ws = 2
        res = harness.run(seam_worker, ws, "coll", timeout=120)
        for rank, r in enumerate(res):
            self.assertEqual(r["work_type"], "CudaWork", r)
            self.assertEqual(r["allreduce"], [float(2 * i + 1) for i in range(8)])
            self.assertTrue(r["event_on_stream"], r)
            self.assertTrue(r["completed"], r)
            self.assertTrue(r["waited"], r)
            self.assertEqual(r["future"], [[float(2 * i + 1) for i in range(8)]])
            self.assertEqual(r["host_syncs"], 0)
            self.assertEqual(r["created_after_2"], [0x1000])
            self.assertEqual(r["created"], [0x1000, 0x2000])
            self.assertEqual(r["broadcast"], [2.0] * 5)
            self.assertEqual(r["reduce"], [i * 3 for i in range(6)] if rank == 0 else [i * (rank + 1) for i in range(6)])
            base = [[float(4 * j + i) for j in range(4)] for i in range(4)]
            self.assertEqual(r["noncontig"], [[v * ws for v in row] for row in base])
            self.assertEqual(r["allgather"], [[1, 2], [11, 12]])
            self.assertEqual(r["allgather_into"], [1, 2, 11, 12])
            self.assertEqual(r["reduce_scatter_tensor"], [float(2 * (3 * rank + i) + 1) for i in range(3)])
            self.assertEqual(r["reduce_scatter_list"], [float(0 * 100 + rank + 1 * 100 + rank)] * 2)
            self.assertIn("coll: allgather: mixes CUDA and CPU tensors", r["mixed"])
            self.assertIn("coll: gather: CUDA tensors are not supported for this operation yet", r["refused"])
            if r["device_types"] is not None:
                self.assertEqual(r["device_types"], ["cpu", "cuda"])

    def test_real_seam_without_cuda(self):
        harness.setup_paths()
        import torch_coll
        from torch_coll import _cuda, _lib
        uid = _lib.get_unique_id()
        comm = _lib.comm_init_rank(uid, 1, 0)
        try:
            with self.assertRaises(torch_coll.CollError) as cm:
                _cuda.stream_create_cuda(comm, 0)
            msg = str(cm.exception)
            print("\nwithout CUDA: %s" % msg, file=sys.stderr)
            self.assertTrue("collStreamCreateCuda" in msg, msg)
        finally:
            _lib.lib.collCommDestroy(comm)

    def test_real_seam_on_fake_driver(self):
        """collStreamCreateCuda through the shim's real seam, on tests/fakecuda's driver (CUDA builds)."""
        import subprocess
        lib = os.environ.get("COLL_LIBRARY", "")
        fake = os.path.join(os.path.dirname(lib), "tests", "fakecuda", "libcollfakecuda.so")
        if not lib or not os.path.exists(fake):
            self.skipTest("no fake CUDA driver next to %s (a build without CUDA)" % (lib or "libcoll.so"))
        code = ("from torch_coll import _cuda, _lib\n"
                "comm = _lib.comm_init_rank(_lib.get_unique_id(), 1, 0)\n"
                "s = _cuda.stream_create_cuda(comm, 0)\n"
                "assert s is not None\n"
                "print('query', _lib.lib.collStreamQuery(s))\n"
                "_lib.lib.collStreamDestroy(s)\n"
                "_lib.lib.collCommDestroy(comm)\n")
        env = dict(os.environ, COLL_CUDA_LIBRARY=fake, PYTHONPATH=os.path.join(harness.REPO, "python"))
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("query 0", out.stdout)

    def test_register_devices(self):
        harness.setup_paths()
        import inspect
        import torch.distributed as dist
        import torch_coll  # noqa: F401
        params = inspect.signature(dist.Backend.register_backend).parameters
        if "devices" not in params:
            self.skipTest("this torch's register_backend has no devices (torch 1.x): CPU tensors only")
        cap = getattr(dist.Backend, "backend_capability", None)
        if cap is None:
            self.skipTest("this torch does not record a backend's devices")
        self.assertEqual(list(cap["coll"]), ["cpu", "cuda"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
