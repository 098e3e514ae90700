#!/usr/bin/env python3
"""DDP on CUDA tensors through the coll shim against the same model on CPU
with gloo (tests/gpu/run.sh). Ranks are processes spawned here, all on
GPU 0 for the coll run. Prints one line per step with both losses and
exits 0 when every step agrees within a relative 1e-4 (float32 sums in a
different order on the GPU), 77 when the shim or torch cannot run coll on
CUDA here (the reason is printed), 1 on a mismatch or a failure.

    python3 tests/gpu/ddp_cuda.py --world 2 --steps 20
"""
import argparse
import os
import socket
import sys
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def train(rank, world, backend, device, steps, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    try:
        if backend == "coll":
            import torch_coll  # noqa: F401
        dist.init_process_group(backend, rank=rank, world_size=world)
        g = torch.Generator().manual_seed(0)
        x = torch.randn(steps * 16 * world, 32, generator=g)
        y = torch.tanh(x @ torch.randn(32, 1, generator=g))
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
        ddp = DDP(model, device_ids=[0] if device.type == "cuda" else None)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
        losses = []
        for s in range(steps):
            lo = (s * world + rank) * 16
            xb, yb = x[lo:lo + 16].to(device), y[lo:lo + 16].to(device)
            opt.zero_grad()
            loss = nn.functional.mse_loss(ddp(xb), yb)
            loss.backward()
            opt.step()
            t = loss.detach().clone()
            dist.all_reduce(t)
            losses.append(float(t.cpu()) / world)
        dist.destroy_process_group()
        if rank == 0:
            out.put(("ok", losses))
    except Exception as e:  # reported by the parent
        if rank == 0:
            out.put(("error", "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc(limit=3))))


def run(world, backend, device, steps):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=train, args=(r, world, backend, torch.device(device), steps, port, q))
             for r in range(world)]
    for p in procs:
        p.start()
    try:
        res = q.get(timeout=120)
    except Exception:
        res = ("error", "no result from rank 0 within 120 s")
    for p in procs:
        p.join(30)
        if p.is_alive():
            p.kill()
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--coll-device", default="cuda", help="cpu checks this script on a machine without a GPU")
    a = ap.parse_args()
    if a.coll_device == "cuda" and not torch.cuda.is_available():
        print("SKIPPED: torch %s sees no CUDA device" % torch.__version__)
        return 77
    try:
        import torch_coll  # noqa: F401
    except Exception as e:
        print("SKIPPED: the coll shim does not import: %s" % e)
        return 77
    ref = run(a.world, "gloo", "cpu", a.steps)
    if ref[0] != "ok":
        print("FAILED: the gloo reference run failed: %s" % ref[1])
        return 1
    got = run(a.world, "coll", a.coll_device, a.steps)
    if got[0] != "ok":
        msg = got[1]
        if "no collStreamCreateCuda" in msg:  # a libcoll without CUDA streams: nothing to test
            print("SKIPPED: this libcoll cannot run collectives on CUDA tensors: %s" % msg.splitlines()[0])
            return 77
        print("FAILED: the coll CUDA run failed: %s" % msg)
        return 1
    bad = 0
    print("| step | gloo (CPU) loss | coll (%s) loss |\n|---|---|---|" % a.coll_device.upper())
    for s, (r, g) in enumerate(zip(ref[1], got[1])):
        ok = abs(r - g) <= 1e-4 * max(1.0, abs(r))
        bad += not ok
        print("| %d | %.6f | %.6f%s |" % (s, r, g, "" if ok else "  MISMATCH"))
    print("%s: %d of %d steps agree within 1e-4 (torch %s, %d ranks)"
          % ("passed" if not bad else "FAILED", a.steps - bad, a.steps, torch.__version__, a.world))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
