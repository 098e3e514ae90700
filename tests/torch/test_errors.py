"""Failure and asynchrony behaviour of the coll backend:
* a peer that dies mid-job ends every other rank's wait() with a RuntimeError
  carrying coll's message, within the deadline, instead of hanging;
* async_op=True returns before the data moved, and wait() completes it;
* group.monitored_barrier(timeout) names the rank that did not arrive (gloo's message);
* all_reduce(SUM) of sparse COO tensors works (as with gloo);
* unsupported requests (bitwise ops, any-source receive unless
  COLL_TORCH_ANY_SOURCE=1) raise at once; with it, any-source receives work.
Run: /usr/bin/python3 tests/torch/test_errors.py"""
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402


def dead_peer_worker(rank, ws, backend, sync_dir):
    import torch
    import torch.distributed as dist
    t = torch.ones(1000)
    dist.all_reduce(t)
    # the last rank dies only once every rank finished that all_reduce (its data may still be in flight)
    open(os.path.join(sync_dir, "done.%d" % rank), "w").close()
    if rank == ws - 1:
        deadline = time.time() + 60
        while time.time() < deadline and not all(os.path.exists(os.path.join(sync_dir, "done.%d" % r))
                                                 for r in range(ws)):
            time.sleep(0.01)
        os._exit(0)  # dies without a word
    time.sleep(0.5)
    res = {}
    t0 = time.time()
    try:
        dist.all_reduce(t)  # blocking form: work.wait() inside
        res["blocking"] = "no error"
    except RuntimeError as e:
        res["blocking"] = str(e)
    res["seconds"] = time.time() - t0
    try:
        w = dist.all_reduce(t, async_op=True)
        w.wait()
        res["async"] = "no error"
    except RuntimeError as e:
        res["async"] = str(e)
    return res


def async_worker(rank, ws, backend):
    import torch
    import torch.distributed as dist
    t = torch.ones(16 * 1024 * 1024)
    dist.all_reduce(t)  # warm up the connections
    t0 = time.time()
    w = dist.all_reduce(t, async_op=True)
    issued = time.time() - t0
    done_at_issue = w.is_completed()
    w.wait()
    total = time.time() - t0
    ok = bool((t == ws * ws).all())
    fut_value = w.get_future().wait()
    return {"issued": issued, "total": total, "done_at_issue": done_at_issue, "ok": ok,
            "fut_is_tensor_list": isinstance(fut_value, list) and fut_value[0] is t}


def async_refuse_any_worker(rank, ws, backend):
    a = async_worker(rank, ws, backend)
    b = refuse_worker(rank, ws, backend)
    import torch.distributed as dist
    os.environ["COLL_TORCH_ANY_SOURCE"] = "1"  # read when a group is created: on for this group only
    g = dist.new_group(list(range(ws)))
    c = any_source_worker(rank, ws, backend, g)
    d = monitored_worker(rank, ws, backend)
    d.update(sparse_worker(rank, ws, backend))
    return a, b, c, d


def sparse_worker(rank, ws, backend):
    """all_reduce(SUM) of sparse COO tensors with a different nnz on every rank
    (gloo supports it; coll all-gathers indices and values) equals the dense sum."""
    import torch
    import torch.distributed as dist
    g = torch.Generator().manual_seed(7)
    dense = [torch.zeros(6, 3) for _ in range(ws)]
    for r in range(ws):
        for _ in range(r + 2):
            dense[r][torch.randint(6, (1,), generator=g).item()] = torch.randn(3, generator=g)
    t = dense[rank].to_sparse(1)
    dist.all_reduce(t)
    return {"sparse_is_sparse": t.is_sparse, "sparse_equal": torch.allclose(t.to_dense(), sum(dense), atol=1e-6)}


def monitored_worker(rank, ws, backend):
    """group.monitored_barrier(timeout), as gloo's: passes when all ranks arrive; alone
    on rank 0 it names the rank that did not arrive (every such rank with
    wait_all_ranks) after the timeout; the group still works afterwards."""
    import datetime
    import torch
    import torch.distributed as dist
    g = dist.new_group(list(range(ws)))
    out = {}
    g.monitored_barrier(datetime.timedelta(seconds=60))
    g.monitored_barrier(datetime.timedelta(seconds=60), wait_all_ranks=True)
    out["all"] = "passed"
    if rank == 0:
        for key, wait_all in (("alone", False), ("alone_all", True)):
            t0 = time.time()
            try:
                g.monitored_barrier(datetime.timedelta(seconds=0.5), wait_all_ranks=wait_all)
                out[key] = "no error"
            except RuntimeError as e:
                out[key] = str(e)
            out[key + "_s"] = time.time() - t0
    dist.barrier()
    t = torch.ones(2)
    dist.all_reduce(t, group=g)
    out["after"] = t.tolist()
    return out


def refuse_worker(rank, ws, backend):
    import torch
    import torch.distributed as dist
    out = {}
    for op in ("BAND", "BOR", "BXOR"):
        try:
            dist.all_reduce(torch.ones(3, dtype=torch.int32), op=getattr(dist.ReduceOp, op))
            out[op] = "no error"
        except RuntimeError as e:
            out[op] = str(e)
    try:
        dist.recv(torch.zeros(3))
        out["any_source"] = "no error"
    except RuntimeError as e:
        out["any_source"] = str(e)
    t = torch.arange(4.0)
    dist.all_reduce(t)  # the group still works
    out["after"] = t.tolist()
    return out


def any_source_worker(rank, ws, backend, g=None):
    import torch
    import torch.distributed as dist
    if rank == 0:
        got = []
        for _ in range(2 * (ws - 1)):
            t = torch.zeros(3)
            src = dist.recv(t, group=g)  # any source
            got.append((src, t[0].item()))
        dist.barrier()  # only now rank 1 sends its third message (else an any-source receive may take it)
        t = torch.zeros(3)
        dist.recv(t, 1, group=g)  # the message after the two that were received from rank 1
        got.append((1, t[0].item()))
        return got
    dist.send(torch.full((3,), 10.0 * rank), 0, group=g)
    time.sleep(0.05 * rank)
    dist.send(torch.full((3,), 10.0 * rank + 1), 0, group=g)
    dist.barrier()
    if rank == 1:
        dist.send(torch.full((3,), 99.0), 0, group=g)
    return None


class TestErrors(unittest.TestCase):
    def test_dead_peer(self):
        ws = 3
        import shutil
        import tempfile
        sync_dir = tempfile.mkdtemp(prefix="coll_dead_")
        try:
            res = harness.run(dead_peer_worker, ws, "coll", args=(sync_dir,), timeout=120, env={"COLL_TIMEOUT": "30"},
                              may_die={ws - 1})
        finally:
            shutil.rmtree(sync_dir, ignore_errors=True)
        for r in range(ws - 1):
            self.assertIn("coll", res[r]["blocking"], res[r])
            self.assertLess(res[r]["seconds"], 60, res[r])
            self.assertIn("coll", res[r]["async"], res[r])
        print("\ndead peer: rank 0 got after %.1f s: %s" % (res[0]["seconds"], res[0]["blocking"]), file=sys.stderr)

    def test_async_refusals_any_source(self):
        # (also the tcp:// rendezvous: the other tests use file://, the example env://)
        both = harness.run(async_refuse_any_worker, 3, "coll", timeout=120,
                           init="tcp://127.0.0.1:%d" % harness.free_port(),
                           env={"USE_LIBUV": "0"})  # Debian's torch 2.x TCPStore has no libuv
        res = [b[0] for b in both]
        for r in res:
            self.assertTrue(r["ok"], r)
            self.assertTrue(r["fut_is_tensor_list"], r)
            self.assertLess(r["issued"], r["total"] / 2, r)
        print("\nasync all_reduce of 64 MiB: issue %.4f s, done %.3f s" % (res[0]["issued"], res[0]["total"]),
              file=sys.stderr)

        for out in [b[1] for b in both]:
            for op in ("BAND", "BOR", "BXOR"):
                self.assertIn("bitwise", out[op])
            self.assertIn("any-source", out["any_source"])
            self.assertEqual(out["after"], [0.0, 3.0, 6.0, 9.0])
        # COLL_TORCH_ANY_SOURCE=1: any-source receives in announcement order, then a receive from
        # rank 1 gets rank 1's next message
        got = both[0][2]
        self.assertEqual(sorted(got[:4]), [(1, 10.0), (1, 11.0), (2, 20.0), (2, 21.0)], got)
        for s in (1, 2):  # each source's messages arrive in order
            self.assertEqual([v for r, v in got[:4] if r == s], [10.0 * s, 10.0 * s + 1], got)
        self.assertEqual(got[4], (1, 99.0))
        # monitored_barrier
        mon = [b[3] for b in both]
        for r, m in enumerate(mon):
            self.assertEqual(m["all"], "passed", m)
            self.assertEqual(m["after"], [3.0, 3.0], m)
        self.assertIn("Rank 1 failed to pass monitoredBarrier in 500 ms", mon[0]["alone"], mon[0])
        others = ", ".join(str(r) for r in range(1, len(mon)))
        self.assertIn("Ranks %s failed to pass monitoredBarrier in 500 ms" % others, mon[0]["alone_all"], mon[0])
        for k in ("alone_s", "alone_all_s"):
            self.assertGreaterEqual(mon[0][k], 0.45, mon[0])
            self.assertLess(mon[0][k], 30, mon[0])
        for m in mon:
            self.assertTrue(m["sparse_is_sparse"] and m["sparse_equal"], m)


if __name__ == "__main__":
    unittest.main()
