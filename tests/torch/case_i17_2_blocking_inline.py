"""Issue 17 point 2: a blocking all_reduce through the shim runs in the
calling thread, on coll's NULL stream, with no thread hand-off.

Before the fix every all_reduce was queued on the group's coll stream (which
starts and wakes coll's progress thread) and completed by the shim's
completion thread: two hand-offs per call, 220-600 us for 1 KiB on a busy
2-core VM where the C call takes 15 us.  On 2 ranks:

  A. 300 blocking dist.all_reduce(t) of 1 KiB (float32 SUM, fresh
     rank-dependent values each call, every element checked exactly), then
     50 blocking broadcasts (root alternating, checked) and barriers: the
     process runs no more threads afterwards than before (before the fix:
     one more, coll's progress thread, started by the first queued call);
  B. blocking calls whose result needs a finishing step (a non-contiguous
     tensor: staged and copied back) or a premultiplication (AVG of
     int-valued floats on 2 ranks), exact values;
  C. order with work in flight: an async all_reduce of 4 MiB, then at once a
     blocking all_reduce of the same tensor (falls back to the stream, after
     the first): t == 4 everywhere, and the async Work is complete;
  D. a refused call (ReduceOp.BAND) raises the shim's RuntimeError and the
     group still works.
The median time per blocking 1 KiB call is printed (not judged: the machine
may be shared; benchmarks/torch_shim_perf.py measures it beside the C call).
Run: /usr/bin/python3 tests/torch/case_i17_2_blocking_inline.py"""
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

CALLS = 300


def threads():
    return len(os.listdir("/proc/self/task"))


def worker(rank, ws, backend):
    import torch
    import torch.distributed as dist
    res = {"bad": []}
    t = torch.empty(256)
    base = torch.arange(256, dtype=torch.float32)
    want = base * ws + sum(range(ws))
    before = threads()  # no call yet: a queued one would start coll's progress thread
    times = []
    for i in range(CALLS):
        t.copy_(base).add_(rank + i)
        t0 = time.perf_counter()
        dist.all_reduce(t)
        times.append((time.perf_counter() - t0) * 1e6)
        if not torch.equal(t, want + ws * i):
            res["bad"].append("A: call %d: %s..., want %s..." % (i, t[:4].tolist(), (want + ws * i)[:4].tolist()))
            break
    for i in range(50):  # blocking broadcast (root alternates) and barrier take the same path
        b = torch.full((64,), float(10 * rank + i))
        dist.broadcast(b, i % ws)
        if b.tolist() != [float(10 * (i % ws) + i)] * 64:
            res["bad"].append("A: broadcast %d from %d: %s..." % (i, i % ws, b[:4].tolist()))
            break
        dist.barrier()
    res["threads"] = (before, threads())
    res["median_us"] = statistics.median(times)
    # B: a non-contiguous tensor (staged, copied back), AVG (premultiplied)
    x = (torch.arange(12, dtype=torch.float32).reshape(3, 4) + 10 * rank).t()
    dist.all_reduce(x)
    wx = (2 * torch.arange(12, dtype=torch.float32).reshape(3, 4) + 10 * sum(range(ws))).t()
    if not torch.equal(x, wx):
        res["bad"].append("B: non-contiguous: %s, want %s" % (x.tolist(), wx.tolist()))
    if hasattr(dist.ReduceOp, "AVG"):
        a = torch.full((5,), float(2 * rank + 1))
        try:
            dist.all_reduce(a, op=dist.ReduceOp.AVG)
            if a.tolist() != [float(ws)] * 5:  # mean of 1, 3 (2 ranks) = 2
                res["bad"].append("B: AVG: %s, want %s" % (a.tolist(), [float(ws)] * 5))
        except RuntimeError as e:
            res["bad"].append("B: AVG raised %s" % e)
    # C: in flight, then blocking on the same tensor
    big = torch.ones(1 << 20)
    w = dist.all_reduce(big, async_op=True)
    dist.all_reduce(big)
    if not (bool((big == ws * ws).all()) and w.is_completed()):
        res["bad"].append("C: big[0]=%r big[-1]=%r (want %r), async completed %s"
                          % (big[0].item(), big[-1].item(), float(ws * ws), w.is_completed()))
    # D: refused, then the group still works
    try:
        dist.all_reduce(torch.ones(3, dtype=torch.int32), op=dist.ReduceOp.BAND)
        res["bad"].append("D: BAND did not raise")
    except RuntimeError as e:
        if "coll" not in str(e):
            res["bad"].append("D: BAND raised %r" % str(e))
    y = torch.full((4,), float(rank))
    dist.all_reduce(y)
    if y.tolist() != [float(sum(range(ws)))] * 4:
        res["bad"].append("D: after the refused call: %s" % y.tolist())
    return res


def main():
    import torch
    print("torch %s" % torch.__version__, flush=True)
    res = harness.run(worker, 2, "coll", timeout=120)
    bad = []
    for r, d in enumerate(res):
        print("rank %d: threads before/after %d blocking calls %s; median %.1f us per 1 KiB call"
              % (r, CALLS, d["threads"], d["median_us"]), flush=True)
        bad += ["rank %d: %s" % (r, b) for b in d["bad"]]
        if d["threads"][1] != d["threads"][0]:
            bad.append("rank %d: %d threads after the blocking calls, %d before (a thread was started for them)"
                       % (r, d["threads"][1], d["threads"][0]))
    print("case_i17_2_blocking_inline: %s" % ("FAILED" if bad else "passed"))
    if bad:
        print("\n".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
