"""BR-01 part 3 (pytorch/pytorch#85234: gloo died with SIGFPE on an all-gather
of zero-element tensors): through the shim on 4 ranks,
    x = torch.ones(1, 0, 2); out = [torch.zeros_like(x) for _ in range(4)]
    dist.all_gather(out, x)
returns within 1 s with four tensors of shape (1, 0, 2), and a following
all_reduce of [rank + 1] on the same group gives 10.0 on every rank.
Extension: the same for all_gather_into_tensor, the async form, and the
other collectives of zero elements (all_reduce, broadcast, reduce,
reduce_scatter_tensor) before that all_reduce.
Run: /usr/bin/python3 tests/torch/case_br01_zero_allgather.py"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402


def zero_worker(rank, ws, backend):
    import torch
    import torch.distributed as dist
    res = {}
    x = torch.ones(1, 0, 2)
    out = [torch.zeros_like(x) for _ in range(ws)]
    t0 = time.monotonic()
    dist.all_gather(out, x)
    res["all_gather_seconds"] = time.monotonic() - t0
    res["shapes"] = [tuple(o.shape) for o in out]
    res["dtypes"] = [str(o.dtype) for o in out]
    # extension
    flat = torch.zeros(ws, 0, 2)
    dist.all_gather_into_tensor(flat, x) if hasattr(dist, "all_gather_into_tensor") else \
        dist._all_gather_base(flat, x)
    res["into_tensor"] = tuple(flat.shape)
    out2 = [torch.zeros(0) for _ in range(ws)]
    w = dist.all_gather(out2, torch.ones(0), async_op=True)
    w.wait()
    res["async"] = (w.is_completed(), [tuple(o.shape) for o in out2])
    e = torch.ones(0, 3)
    dist.all_reduce(e)
    dist.broadcast(e, 0)
    dist.reduce(e, 0)
    rs = torch.zeros(0)
    (dist.reduce_scatter_tensor if hasattr(dist, "reduce_scatter_tensor") else dist._reduce_scatter_base)(
        rs, torch.ones(0))
    res["others"] = (tuple(e.shape), tuple(rs.shape))
    y = torch.tensor([float(rank + 1)])
    dist.all_reduce(y)
    res["after"] = y.item()
    return res


def main():
    import torch
    print("torch %s" % torch.__version__, flush=True)
    ws = 4
    res = harness.run(zero_worker, ws, "coll", timeout=180)
    bad = []
    for r, d in enumerate(res):
        print("rank %d: %s" % (r, d), flush=True)
        if d["shapes"] != [(1, 0, 2)] * ws or d["dtypes"] != ["torch.float32"] * ws:
            bad.append("rank %d: all_gather gave shapes %s dtypes %s" % (r, d["shapes"], d["dtypes"]))
        if d["all_gather_seconds"] >= 1.0:
            bad.append("rank %d: all_gather took %.2f s (limit 1 s)" % (r, d["all_gather_seconds"]))
        if d["into_tensor"] != (ws, 0, 2) or d["async"] != (True, [(0,)] * ws) or d["others"] != ((0, 3), (0,)):
            bad.append("rank %d: zero-element extension: %s %s %s" % (r, d["into_tensor"], d["async"], d["others"]))
        if d["after"] != 10.0:
            bad.append("rank %d: all_reduce after them gave %r, want 10.0" % (r, d["after"]))
    print("case_br01_zero_allgather: %s" % ("FAILED" if bad else "passed"))
    if bad:
        print("\n".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
