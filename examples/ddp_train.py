#!/usr/bin/python3
"""Data-parallel training over Braid: DistributedDataParallel and DistributedSampler.

A small MLP learns a synthetic regression task. Each rank reads its shard of
the data through torch's DistributedSampler (reshuffled every epoch), DDP
all-reduces the gradients through the "braid" backend, and at the end every
rank checks that its parameters equal rank 0's, bit for bit.

Run on 2 local ranks (any launcher that sets MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE):

    OMP_NUM_THREADS=1 PYTHONPATH=build/src/bindings/torch build/tools/braidrun -n 2 /usr/bin/python3 examples/ddp_train.py

Options: --backend braid|gloo, --epochs N, --hook none|allreduce|fp16,
--bucket-cap-mb MB, --accumulate K (gradients summed locally under no_sync()
for K-1 of every K steps), --out FILE (rank 0 saves the final parameters),
--bench (time the steps instead of printing the loss).
"""
import argparse
import datetime
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

try:
    import braid_torch  # noqa: F401  registers the "braid" backend
except ImportError:
    braid_torch = None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="braid")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--hook", choices=["none", "allreduce", "fp16"], default="none")
    ap.add_argument("--bucket-cap-mb", type=float, default=25)
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--samples", type=int, default=1024)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--out", default="")
    ap.add_argument("--bench", action="store_true")
    a = ap.parse_args()

    dist.init_process_group(a.backend, init_method="env://", timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)  # the same data and initial model on every rank
    x = torch.randn(a.samples, 16)
    y = (x[:, :4].sum(1, keepdim=True) - x[:, 4:8].prod(1, keepdim=True)).tanh()
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=7)
    loader = DataLoader(data, batch_size=a.batch, sampler=sampler)

    model = nn.Sequential(nn.Linear(16, a.width), nn.Tanh(), nn.Linear(a.width, a.width), nn.Tanh(),
                          nn.Linear(a.width, 1))
    ddp = DDP(model, bucket_cap_mb=a.bucket_cap_mb)
    if a.hook == "allreduce":
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    elif a.hook == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.MSELoss()

    step_times = []
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        total = 0.0
        for i, (xb, yb) in enumerate(loader):
            t0 = time.perf_counter()
            last = (i + 1) % a.accumulate == 0
            if last:
                loss = loss_fn(ddp(xb), yb)
                loss.backward()
                opt.step()
                opt.zero_grad()
            else:
                with ddp.no_sync():  # local gradients only; the next synced step carries them
                    loss = loss_fn(ddp(xb), yb)
                    loss.backward()
            step_times.append(time.perf_counter() - t0)
            total += loss.item()
        if rank == 0 and not a.bench:
            print(f"epoch {epoch}: mean loss {total / len(loader):.5f}", flush=True)

    # Every rank must hold rank 0's parameters exactly.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    mine = flat.clone()
    dist.broadcast(flat, 0)
    same = torch.equal(flat, mine)
    agree = torch.tensor([1 if same else 0])
    dist.all_reduce(agree)
    if rank == 0:
        print(f"parameters identical on all {world} ranks: {agree.item() == world}", flush=True)
        if a.out:
            torch.save(flat, a.out)
        if a.bench:
            s = sorted(step_times[len(step_times) // 4:])  # after warm-up
            print(f"{a.backend}: median step {s[len(s) // 2] * 1e3:.3f} ms over {len(s)} steps", flush=True)
    dist.destroy_process_group()
    if agree.item() != world:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
