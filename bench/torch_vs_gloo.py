#!/usr/bin/python3
"""Braid against Gloo through torch.distributed, side by side in one run.

For each world size, jobs alternate between the backends (braid, gloo, braid,
gloo, ...: --rounds of each), each timing all_reduce, all_gather (the list
form, which Gloo has) and broadcast of float32 from 8 B to 64 MiB the way torch users time:
warm-up calls, then many calls in a loop under time.perf_counter, a barrier
before each loop, OMP_NUM_THREADS=1 as torchrun sets it; the figure is the slowest rank's mean time per call, and
the table shows the median over rounds. Then the plugin's own cost: braid's
dist.all_reduce of 8 B against braid-bench's time for the same call on the
same ranks, and a DDP step of examples/ddp_train.py on each backend.

    PYTHONPATH=build/src/bindings/torch /usr/bin/python3 bench/torch_vs_gloo.py --build build
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time

SIZES = [8, 64, 1024, 16384, 65536, 1 << 20, 16 << 20, 64 << 20]
OPS = ["all_reduce", "all_gather", "broadcast"]


def fmt_size(b):
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k:
            return f"{b // k} {unit}"
    return f"{b} B"


def worker(backend, sizes, budget):
    import torch
    import torch.distributed as dist
    if backend == "braid":
        import braid_torch  # noqa: F401
    dist.init_process_group(backend, init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    out = {}
    for op in OPS:
        for size in sizes:
            n = max(1, size // 4)
            t = torch.ones(n)
            outs = [torch.empty(n) for _ in range(world)]  # the list form: Gloo has no _allgather_base

            def call():
                if op == "all_reduce":
                    dist.all_reduce(t)
                elif op == "all_gather":
                    dist.all_gather(outs, t)
                else:
                    dist.broadcast(t, 0)
            for _ in range(3):
                call()
            # Calls per loop from a trial, the same on every rank (max).
            dist.barrier()
            t0 = time.perf_counter()
            call()
            trial = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(trial, op=dist.ReduceOp.MAX)
            iters = int(min(2000, max(5, budget / max(trial.item(), 1e-6))))
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                call()
            per = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
            dist.all_reduce(per, op=dist.ReduceOp.MAX)
            out[f"{op} {size}"] = per.item()
    if rank == 0:
        print("RESULT " + json.dumps(out), flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job(world, argv, env_extra=None):
    port = free_port()
    procs = []
    for r in range(world):
        # OMP_NUM_THREADS=1, as torchrun sets it for several ranks per host:
        # torch's OpenMP workers otherwise spin on the CPUs the communication
        # needs (all_reduce of 16 MiB through braid: 9-15 ms with them, 2.3-2.7
        # ms without; braid-bench 2.3-3.2 ms).
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r),
                   WORLD_SIZE=str(world), OMP_NUM_THREADS="1", **(env_extra or {}))
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=900)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"job {argv} failed:\n" + "\n".join(outs))
    return outs[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", default=None)
    ap.add_argument("--build", default="build")
    ap.add_argument("--worlds", default="2,4")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--budget", type=float, default=0.25, help="seconds of timed calls per size")
    a = ap.parse_args()
    if a.worker:
        worker(a.worker, SIZES, a.budget)
        return
    me = os.path.abspath(__file__)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} torch_vs_gloo.py --worlds {a.worlds} --rounds {a.rounds}", flush=True)
    for world in [int(w) for w in a.worlds.split(",")]:
        res = {"braid": [], "gloo": []}
        for _ in range(a.rounds):
            for backend in ("braid", "gloo"):
                out = job(world, [sys.executable, me, "--worker", backend, "--budget", str(a.budget)])
                res[backend].append(json.loads(out.split("RESULT ", 1)[1].splitlines()[0]))
        print(f"\n## {world} ranks: median of {a.rounds} rounds, time per call (us); speed-up = gloo / braid")
        print("| op | size | braid | gloo | speed-up |\n|---|---|---|---|---|")
        for op in OPS:
            for size in SIZES:
                k = f"{op} {size}"
                b = statistics.median(r[k] for r in res["braid"]) * 1e6
                g = statistics.median(r[k] for r in res["gloo"]) * 1e6
                print(f"| {op} | {fmt_size(size)} | {b:.1f} | {g:.1f} | {g / b:.1f}x |", flush=True)
        if world == 2:
            b16 = statistics.median(r[f"all_reduce {16 << 20}"] for r in res["braid"])
            g16 = statistics.median(r[f"all_reduce {16 << 20}"] for r in res["gloo"])
            busbw = lambda t: 2 * (world - 1) / world * (16 << 20) / t / 1e9  # noqa: E731
            print(f"\nall_reduce 16 MiB busbw: braid {busbw(b16):.2f} GB/s, gloo {busbw(g16):.2f} GB/s")
            # The plugin's own cost: dist.all_reduce(8 B) minus braid-bench's time for the same call.
            bb = os.path.join(a.build, "bench", "braid-bench")
            out = job(world, [bb, "allreduce", "-b", "8", "-e", "8", "-n", "2000", "-w", "200"])
            m = re.search(r"^\s*8\s+\d+\s+\w+\s+\w+\s+-?\d+\s+([0-9.]+)", out, re.M)
            torch_us = statistics.median(r["all_reduce 8"] for r in res["braid"]) * 1e6
            print(f"\nbraid-bench all_reduce 8 B, 2 ranks:\n{out.strip()}")
            if m:
                print(f"plugin cost: dist.all_reduce 8 B {torch_us:.2f} us - braid-bench {float(m.group(1)):.2f} us = "
                      f"{torch_us - float(m.group(1)):.2f} us")
            ex = os.path.join(os.path.dirname(me), "..", "examples", "ddp_train.py")
            for backend in ("braid", "gloo", "braid", "gloo"):
                out = job(world, [sys.executable, ex, "--backend", backend, "--bench", "--epochs", "4",
                                  "--width", "256"])
                print("DDP step, " + [ln for ln in out.splitlines() if "median step" in ln][0])


if __name__ == "__main__":
    main()
