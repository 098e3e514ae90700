#!/usr/bin/env python3
"""Train a small MLP with DistributedDataParallel; the backend is one word.

    torchrun --nproc_per_node=3 examples/ddp_train.py --backend coll
    torchrun --nproc_per_node=3 examples/ddp_train.py --backend gloo
    (torch 1.13 on Debian: /usr/bin/python3 -m torch.distributed.run --nproc_per_node=3 ...)

Both print the same per-step losses.  The only coll-specific line is
`import torch_coll` (it registers the "coll" backend); the package lives in
python/ of the coll repository (PYTHONPATH=python, or found relative to this
file) and loads libcoll.so from $COLL_LIBRARY or the repository's build/.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="coll", help="coll or gloo")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=16, help="per rank")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    if args.backend == "coll":
        try:
            import torch_coll  # noqa: F401  registers the "coll" backend
        except ImportError:
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
            import torch_coll  # noqa: F401

    dist.init_process_group(args.backend)  # env:// from torchrun (RANK, WORLD_SIZE, MASTER_ADDR/PORT)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)

    # the same synthetic data set on every rank; DistributedSampler gives each rank its share
    g = torch.Generator().manual_seed(args.seed)
    x = torch.randn(args.steps * args.batch_size * world, 32, generator=g)
    w_true = torch.randn(32, 1, generator=g)
    y = torch.tanh(x @ w_true) + 0.1 * torch.randn(x.shape[0], 1, generator=g)
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)

    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)

    for step, (xb, yb) in enumerate(loader):
        if step >= args.steps:
            break
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(xb), yb)
        loss.backward()
        opt.step()
        # the global mean loss: every rank's loss, gathered in rank order and summed locally
        losses = [torch.zeros(1) for _ in range(world)]
        dist.all_gather(losses, loss.detach().reshape(1))
        if rank == 0:
            print("step %2d loss %.6f" % (step, sum(l.item() for l in losses) / world), flush=True)

    # every rank ends with the same parameters
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    same = all(torch.equal(gathered[0], t) for t in gathered)
    if rank == 0:
        print("backend %s, %d ranks, parameters identical on all ranks: %s, checksum %.6f"
              % (args.backend, world, same, flat.double().sum().item()), flush=True)
    dist.destroy_process_group()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
