"""BR-10 (pytorch/pytorch#14373: gloo's barrier() did not wait for async
collectives issued before it): through the shim on 2 ranks, float32,
    t = torch.ones(16_777_216)               # 64 MiB
    w = dist.all_reduce(t, async_op=True)    # no wait
    dist.barrier()
then, without w.wait(): t[0] == t[-1] == 2.0 and w.is_completed() on both
ranks.  Second part: rank 1 sleeps 2 s before dist.barrier(); rank 0's
barrier() lasts at least 1.9 s.
Run: /usr/bin/python3 tests/torch/case_br10_barrier.py"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402


def barrier_worker(rank, ws, backend):
    import torch
    import torch.distributed as dist
    t = torch.ones(16_777_216)
    w = dist.all_reduce(t, async_op=True)
    issued_done = w.is_completed()
    dist.barrier()
    res = {"first": t[0].item(), "last": t[-1].item(), "completed": w.is_completed(), "issued_done": issued_done,
           "all": bool((t == 2.0).all())}
    dist.barrier()  # both ranks start the second part together
    if rank == 1:
        time.sleep(2.0)
    t0 = time.monotonic()
    dist.barrier()
    res["barrier_seconds"] = time.monotonic() - t0
    return res


def main():
    import torch
    print("torch %s" % torch.__version__, flush=True)
    res = harness.run(barrier_worker, 2, "coll", timeout=180)
    bad = []
    for r, d in enumerate(res):
        print("rank %d: %s" % (r, d), flush=True)
        if (d["first"], d["last"], d["completed"], d["all"]) != (2.0, 2.0, True, True):
            bad.append("rank %d: after the barrier t[0]=%r t[-1]=%r all 2.0: %s, is_completed() %s"
                       % (r, d["first"], d["last"], d["all"], d["completed"]))
    if res[0]["barrier_seconds"] < 1.9:
        bad.append("rank 0's barrier lasted %.3f s while rank 1 slept 2 s (want >= 1.9 s)" % res[0]["barrier_seconds"])
    print("case_br10_barrier: %s" % ("FAILED" if bad else "passed"))
    if bad:
        print("\n".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
